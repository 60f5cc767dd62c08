package qemu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// OpenImage reads a disk image file (qcow2, raw, any format qemu-nbd
// knows) as a DiskReader, through a read-only qemu-nbd of its own: used
// for the disk files inside a storage snapshot, which no QEMU has open.
// Allocation comes from the image (holes and zero clusters are skipped);
// Changed reports no change set.
//
// qemu-nbd is socket-activated on a socket listened on before it starts,
// so the reader connects at once without waiting for it, and it is killed
// with coffer (Pdeathsig): a killed coffer leaves no qemu-nbd holding a
// snapshot's files.
func OpenImage(ctx context.Context, path, format string, conns int) (hypervisor.DiskReader, error) {
	if format == "" {
		format = "raw"
	}
	dir, err := os.MkdirTemp("", "coffer-image-")
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(dir, "nbd.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		_ = os.RemoveAll(dir) // best effort after the error returned
		return nil, err
	}
	ln.SetUnlinkOnClose(false) // the socket lives on in qemu-nbd
	f, err := ln.File()
	_ = ln.Close()
	if err != nil {
		_ = os.RemoveAll(dir) // best effort after the error returned
		return nil, err
	}
	defer func() { _ = f.Close() }()
	// LISTEN_PID must be qemu-nbd's own pid: sh sets it to $$ and execs.
	cmd := exec.Command("sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1 exec qemu-nbd "$@"`, "qemu-nbd",
		"--read-only", "--persistent", fmt.Sprintf("--shared=%d", max(conns, 1)+2), "--format="+format,
		"--export-name=disk", "--cache=none", "--aio=threads", path)
	cmd.ExtraFiles = []*os.File{f} // fd 3, as socket activation expects
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = os.Environ()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir) // best effort after the error returned
		return nil, fmt.Errorf("start qemu-nbd for %s: %w", path, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = os.RemoveAll(dir)
	}
	r, err := openReader(ctx, "unix", sock, journalDisk{ID: filepath.Base(path), Export: "disk", Changes: "full"}, max(conns, 1))
	if err != nil {
		stop()
		return nil, fmt.Errorf("open %s through qemu-nbd: %w: %s", path, err, strings.TrimSpace(stderr.String()))
	}
	return &imageReader{diskReader: r, stop: stop}, nil
}

type imageReader struct {
	*diskReader
	stop func()
}

func (r *imageReader) Close() error {
	err := r.diskReader.Close()
	if r.stop != nil {
		r.stop()
		r.stop = nil
	}
	return errors.Join(err)
}
