package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/coffer-backup/coffer/bench/benchutil"
	"github.com/coffer-backup/coffer/internal/nbd"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// chunkSpan is the unit the disks' data is written in: its first half
// random, its second zeros, so that it compresses to about half, as OS
// data does under zstd's fastest level.
const chunkSpan = 256 << 10

// startDaemons starts n qemu-storage-daemons, each serving a qcow2 disk
// of size bytes under dir/ds-K/ (VM i on datastore i mod datastores) and
// coffer's monitor dir/vm-NN.qmp, which the qemu connector protects as a
// VM; data bytes of each disk are written with content of its own (no
// deduplication across VMs). Each daemon is killed at exit.
func startDaemons(ctx context.Context, dir string, n, datastores int, size, data int64) {
	qsd, err := exec.LookPath("qemu-storage-daemon")
	benchutil.Check(err)
	qemuImg, err := exec.LookPath("qemu-img")
	benchutil.Check(err)
	for i := range n {
		name := fmt.Sprintf("vm-%02d", i)
		ds := filepath.Join(dir, fmt.Sprintf("ds-%d", i%datastores))
		benchutil.Check(os.MkdirAll(ds, 0o755))
		img, sock, pid := filepath.Join(ds, name+".qcow2"), filepath.Join(dir, name+".nbd"), filepath.Join(dir, name+".pid")
		benchutil.Run(qemuImg, "create", "-q", "-f", "qcow2", img, fmt.Sprint(size))
		// --daemonize returns once the sockets listen.
		benchutil.Run(qsd, "--blockdev", "driver=file,node-name=file0,filename="+img,
			"--blockdev", "driver=qcow2,node-name=disk0,file=file0",
			"--nbd-server", "addr.type=unix,addr.path="+sock,
			"--export", "type=nbd,id=vda,node-name=disk0,name=vda,writable=on",
			"--chardev", "socket,id=coffer,path="+filepath.Join(dir, name+".qmp")+",server=on,wait=off", "--monitor", "chardev=coffer",
			"--pidfile", pid, "--daemonize")
		benchutil.AtExit(func() {
			if err := testutil.KillDaemon(pid); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		})
		fill(ctx, sock, uint64(i), data)
	}
}

// fill writes data bytes of half-compressible content through the
// daemon's NBD export.
func fill(ctx context.Context, sock string, seed uint64, data int64) {
	c, err := nbd.Dial(ctx, "unix", sock, nbd.ClientOptions{Export: "vda"})
	benchutil.Check(err)
	defer c.Close()
	rng := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	buf := make([]byte, chunkSpan)
	for off := int64(0); off < data; off += chunkSpan {
		_, _ = rng.Read(buf[:chunkSpan/2])
		if _, err := c.WriteAt(buf, off); err != nil {
			benchutil.Fatalf("writing %s: %v", sock, err)
		}
	}
	benchutil.Check(c.Flush(ctx))
}
