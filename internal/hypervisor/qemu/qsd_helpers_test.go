package qemu_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu/qemutest"
	"github.com/coffer-backup/coffer/internal/nbd"
	"github.com/coffer-backup/coffer/internal/qmp"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// qsdInstance is one qemu-storage-daemon standing in for a VM: one qcow2
// disk behind a writable NBD export "vda", coffer's monitor NAME.qmp and,
// optionally, the test's own monitor NAME.adm (one client per monitor).
type qsdInstance struct {
	name, img, qmp, admin, nbd, pid string
}

func startQSD(t *testing.T, dir, name string, size int64, admin bool) *qsdInstance {
	t.Helper()
	bin := testutil.RequireBinary(t, "qemu-storage-daemon")
	qemuImg := testutil.RequireBinary(t, "qemu-img")
	q := &qsdInstance{name: name, img: filepath.Join(dir, name+".qcow2"), qmp: filepath.Join(dir, name+".qmp"),
		nbd: filepath.Join(dir, name+".nbd"), pid: filepath.Join(dir, name+".pid")}
	if out, err := exec.Command(qemuImg, "create", "-q", "-f", "qcow2", q.img, fmt.Sprint(size)).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	args := []string{
		"--blockdev", "driver=file,node-name=file0,filename=" + q.img,
		"--blockdev", "driver=qcow2,node-name=disk0,file=file0",
		"--nbd-server", "addr.type=unix,addr.path=" + q.nbd,
		"--export", "type=nbd,id=vda,node-name=disk0,name=vda,writable=on",
		"--chardev", "socket,id=coffer,path=" + q.qmp + ",server=on,wait=off", "--monitor", "chardev=coffer",
	}
	if admin {
		q.admin = filepath.Join(dir, name+".adm")
		args = append(args, "--chardev", "socket,id=adm,path="+q.admin+",server=on,wait=off", "--monitor", "chardev=adm")
	}
	// --daemonize returns once the sockets listen: no readiness polling.
	args = append(args, "--pidfile", q.pid, "--daemonize")
	if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
		t.Fatalf("qemu-storage-daemon: %v %s", err, out)
	}
	t.Cleanup(func() { testutil.KillPIDFile(t, q.pid) })
	return q
}

// writer writes guestvm workload blocks through a daemon's NBD export, one
// acknowledged write at a time, numbering them 1, 2, 3...: the disk after
// any instant is the disk after the first k writes for some k, which a
// restored point can be checked against exactly without pausing anything.
type writer struct {
	c       *nbd.Conn
	base    uint64
	nblocks uint64
	pace    time.Duration
	rng     *rand.Rand

	mu    sync.Mutex
	log   []uint64 // log[s-1] is the block write s went to
	err   error
	acked atomic.Uint64
	stop  chan struct{}
	done  chan struct{}
}

const writerBase = 8 // base blocks written before the writer starts

// startWriterFilled optionally fills every block with its sequence-0
// version first, so every later write overwrites data that
// copy-before-write must preserve.
func startWriterFilled(ctx context.Context, t *testing.T, q *qsdInstance, seed uint64, pace time.Duration, fill bool) *writer {
	t.Helper()
	c, err := nbd.Dial(ctx, "unix", q.nbd, nbd.ClientOptions{Export: "vda"})
	if err != nil {
		t.Fatal(err)
	}
	w := &writer{c: c, base: writerBase, nblocks: uint64(c.Size() / guestvm.BlockSize), pace: pace,
		rng: rand.New(rand.NewPCG(seed, 7)), stop: make(chan struct{}), done: make(chan struct{})}
	buf := make([]byte, guestvm.BlockSize)
	last := w.base
	if fill {
		last = w.nblocks - 1
	}
	for i := uint64(1); i <= last; i++ {
		guestvm.FillBlock(buf, i, 0)
		if _, err := c.WriteAt(buf, int64(i)*guestvm.BlockSize); err != nil {
			t.Fatal(err)
		}
	}
	guestvm.FillHeader(buf, w.base)
	if _, err := c.WriteAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	go w.loop()
	t.Cleanup(func() { w.halt() })
	return w
}

func (w *writer) loop() {
	defer close(w.done)
	buf := make([]byte, guestvm.BlockSize)
	for seq := uint64(1); ; seq++ {
		select {
		case <-w.stop:
			return
		default:
		}
		idx := w.base + 1 + w.rng.Uint64N(w.nblocks-w.base-1)
		guestvm.FillBlock(buf, idx, seq)
		w.mu.Lock()
		w.log = append(w.log, idx) // before the write: issued() bounds what a snapshot may hold
		w.mu.Unlock()
		if _, err := w.c.WriteAt(buf, int64(idx)*guestvm.BlockSize); err != nil {
			w.mu.Lock()
			w.err = fmt.Errorf("write %d to block %d: %w", seq, idx, err)
			w.mu.Unlock()
			return
		}
		w.acked.Store(seq)
		time.Sleep(w.pace) // a steady write rate, not synchronisation
	}
}

// issued is the number of writes sent so far (the last may be unacknowledged).
func (w *writer) issued() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return uint64(len(w.log))
}

func (w *writer) failure() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// halt stops the writer and returns its error, if any.
func (w *writer) halt() error {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
	w.c.Close()
	return w.failure()
}

// checkPoint verifies that img is exactly the disk after the first k writes
// for some lo <= k <= hi, and returns k.
func (w *writer) checkPoint(t *testing.T, label string, img []byte, lo, hi uint64) uint64 {
	t.Helper()
	if int64(len(img)) != int64(w.nblocks)*guestvm.BlockSize {
		t.Fatalf("%s: restored %d bytes, disk has %d blocks", label, len(img), w.nblocks)
	}
	rep, err := guestvm.CheckDisk(bytes.NewReader(img), int64(len(img)))
	if err != nil {
		t.Fatalf("%s: %v", label, err)
	}
	k := rep.MaxSeq
	if k < lo || k > hi {
		t.Fatalf("%s: newest write in the point is %d; %d were acknowledged before the backup began, %d sent before it ended", label, k, lo, hi)
	}
	w.mu.Lock()
	want := make([]uint64, w.nblocks)
	for s, idx := range w.log[:k] {
		want[idx] = uint64(s + 1)
	}
	w.mu.Unlock()
	zero := make([]byte, guestvm.BlockSize)
	for i := w.base + 1; i < w.nblocks; i++ {
		b := img[int64(i)*guestvm.BlockSize : int64(i+1)*guestvm.BlockSize]
		var got uint64 // zero: never written, or filled at sequence 0
		if !bytes.Equal(b, zero) {
			got, _ = guestvm.CheckBlock(b, i) // CheckDisk verified it
		}
		if got != want[i] {
			t.Fatalf("%s: block %d holds write %d; after write %d it held write %d", label, i, got, k, want[i])
		}
	}
	return k
}

// spansWritten counts the distinct span-sized ranges of the disk that
// writes from+1..to went to.
func (w *writer) spansWritten(from, to uint64, span int64) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := map[int64]bool{}
	for _, idx := range w.log[from:to] {
		seen[int64(idx)*guestvm.BlockSize/span] = true
	}
	return int64(len(seen))
}

// readPoint reads a disk of a backup point into memory through restore's
// random-access reader.
func readPoint(ctx context.Context, t *testing.T, r *repo.Repository, s *repo.Point, key string) []byte {
	t.Helper()
	for _, d := range s.Disks {
		if d.Key != key {
			continue
		}
		dr, err := restore.OpenDisk(ctx, r, d, 64)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, dr.Size())
		if _, err := dr.ReadAt(buf, 0); err != nil {
			t.Fatal(err)
		}
		return buf
	}
	t.Fatalf("point %s has no disk %s", s.ID.Short(), key)
	return nil
}

// namedNode is a block node as query-named-block-nodes lists it, with its
// dirty bitmaps.
type namedNode = qemutest.NamedNode

// namedNodes lists a daemon's block nodes through the test's monitor.
func namedNodes(ctx context.Context, t *testing.T, adm *qmp.Client) []namedNode {
	t.Helper()
	nodes, err := qemutest.NamedNodes(ctx, adm)
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}
