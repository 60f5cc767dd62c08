package qemunbd

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/nbd"
	"github.com/coffer-backup/coffer/internal/testutil"
)

const helperEnv = "COFFER_TEST_QEMUNBD_HELPER" // image|marker

// TestServesAndExitsWithItsClient reads an image through the server, and
// the server exits once its one client disconnects.
func TestServesAndExitsWithItsClient(t *testing.T) {
	testutil.RequireBinary(t, "qemu-nbd")
	ctx := context.Background()
	img := filepath.Join(t.TempDir(), "disk.raw")
	want := bytes.Repeat([]byte("coffer"), 1<<12)
	if err := os.WriteFile(img, want, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Start(img, "-e", "1", "-x", "disk", "-f", "raw", "-r")
	if err != nil {
		t.Fatal(err)
	}
	c, err := nbd.Dial(ctx, "unix", s.Sock, nbd.ClientOptions{Export: "disk"})
	if err != nil {
		s.Kill()
		t.Fatalf("dial: %v: %s", err, s.Stderr())
	}
	got := make([]byte, len(want))
	if _, err := c.ReadAtContext(ctx, got, 0); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %v, equal %v", err, bytes.Equal(got, want))
	}
	_ = c.Close()
	if err := s.Wait(ctx); err != nil {
		t.Fatalf("the server did not end cleanly after its client: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(s.Sock)); !os.IsNotExist(err) {
		t.Fatalf("the socket's directory remains: %v", err)
	}
}

// TestAnImageItCannotOpenFailsTheDial: a client of a qemu-nbd that died
// at start gets an error, not a wait.
func TestAnImageItCannotOpenFailsTheDial(t *testing.T) {
	testutil.RequireBinary(t, "qemu-nbd")
	s, err := Start(filepath.Join(t.TempDir(), "absent.qcow2"), "-x", "disk", "-f", "qcow2")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := nbd.Dial(ctx, "unix", s.Sock, nbd.ClientOptions{Export: "disk"}); err == nil || ctx.Err() != nil {
		t.Fatalf("a dial to a server that could not open its image: %v (context %v)", err, ctx.Err())
	}
	if err := s.Wait(ctx); err == nil || !strings.Contains(err.Error(), "absent.qcow2") {
		t.Fatalf("the server's end does not say why: %v", err)
	}
}

// TestDiesWithItsParent kills a process that started a server and never
// connected (the window --fork's daemon outlived): its qemu-nbd is gone.
func TestDiesWithItsParent(t *testing.T) {
	testutil.RequireBinary(t, "qemu-nbd")
	dir := t.TempDir()
	img, marker := filepath.Join(dir, "disk.raw"), filepath.Join(dir, "started")
	if err := os.WriteFile(img, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperStartAndWait$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+img+"|"+marker)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the helper's server to start", func() bool { _, err := os.Stat(marker); return err == nil && len(Serving(dir)) == 1 })
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	waitFor(t, "the killed helper's qemu-nbd to end", func() bool { return len(Serving(dir)) == 0 })
}

// TestHelperStartAndWait is the process TestDiesWithItsParent kills.
func TestHelperStartAndWait(t *testing.T) {
	args := strings.Split(os.Getenv(helperEnv), "|")
	if len(args) != 2 {
		t.Skip("helper process of TestDiesWithItsParent")
	}
	if _, err := Start(args[0], "-x", "disk", "-f", "raw"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(args[1], nil, 0o600); err != nil {
		t.Fatal(err)
	}
	select {} // killed here
}

// waitFor polls cond for a minute: a process's start or exit is seen
// only in /proc.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("waited a minute for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // a poll's pace for /proc
	}
}
