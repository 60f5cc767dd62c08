package nbd

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestClientWritesToQemuNBD writes through a writable qemu-nbd export
// (QEMU answers writes simply on success and structurally on error) and
// reads the data back; a read-only connection refuses to write.
func TestClientWritesToQemuNBD(t *testing.T) {
	qemuImg := testutil.RequireBinary(t, "qemu-img")
	qemuNBD := testutil.RequireBinary(t, "qemu-nbd")
	dir := t.TempDir()
	img := filepath.Join(dir, "d.qcow2")
	if out, err := exec.Command(qemuImg, "create", "-q", "-f", "qcow2", img, "64M").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	sock := filepath.Join(dir, "nbd.sock")
	pidFile := filepath.Join(dir, "nbd.pid")
	if out, err := exec.Command(qemuNBD, "--fork", "--pid-file", pidFile, "-t", "-e", "2", "-x", "disk", "-k", sock, "-f", "qcow2", img).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	defer testutil.KillPIDFile(t, pidFile)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := Dial(ctx, "unix", sock, ClientOptions{Export: "disk"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Larger than QEMU's 32 MiB request limit: split into several writes.
	data := bytes.Repeat([]byte("coffer-write-"), 3<<20)[:36<<20]
	if n, err := c.WriteAtContext(ctx, data, 4096, true); err != nil || n != len(data) {
		t.Fatalf("write: %d %v", n, err)
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(data))
	if _, err := c.ReadAtContext(ctx, got, 4096); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %v, equal %v", err, bytes.Equal(got, data))
	}
	// An error reply leaves the connection usable.
	c.mu.Lock()
	c.size = 1 << 30
	c.mu.Unlock()
	var ne *Error
	if _, err := c.WriteAt(data[:4096], 512<<20); !errors.As(err, &ne) {
		t.Fatalf("write beyond the disk: %v", err)
	}
	if _, err := c.WriteAt(data[:4096], 0); err != nil {
		t.Fatalf("write after a rejected one: %v", err)
	}
	testutil.KillPIDFile(t, pidFile)

	// A read-only export refuses before sending anything.
	ro := filepath.Join(dir, "ro.sock")
	roPID := filepath.Join(dir, "ro.pid")
	if out, err := exec.Command(qemuNBD, "--fork", "--pid-file", roPID, "-r", "-t", "-x", "disk", "-k", ro, "-f", "qcow2", img).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	defer testutil.KillPIDFile(t, roPID)
	r, err := Dial(ctx, "unix", ro, ClientOptions{Export: "disk"})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.WriteAt(data[:4096], 0); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("write to a read-only export: %v", err)
	}
}
