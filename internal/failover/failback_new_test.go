package failover

import (
	"context"
	"crypto/sha256"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/replica"
)

// TestUnplannedFailoverThenFailbackToANewLocation: the source site is
// lost (its guest killed), its standby fails over and the DR VM writes;
// the failback to a new location writes the DR VM's disk as a new qcow2
// file that equals it (qemu-img compare), leaves the original disk byte
// for byte as it was, clears the failover and removes the DR overlays;
// the guest's own check passes on the new disk. A failback onto a file
// that exists is refused before anything is written.
func TestUnplannedFailoverThenFailbackToANewLocation(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := newSite(t, ctx, 1, "write")
	_, vm := s.replicate(0)
	s.vms[0].Kill()
	<-s.vms[0].Exited()
	original := fileSum(t, s.disks[0])
	started, err := Failover(ctx, vm, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = StopFailedOver(context.Background(), vm, time.Second) })
	console := filepath.Join(started.Dir, "console.log")
	at := waitFile(ctx, t, console, 0, "COFFER CHECK OK")
	waitFile(ctx, t, console, at, "COFFER WROTE 32")
	if err := StopFailedOver(ctx, vm, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	st, _ := replica.LoadState(vm.Dir)
	drImage := filepath.Join(t.TempDir(), "dr.raw")
	if out, err := exec.Command("qemu-img", "convert", "-U", "-O", "raw", st.FailedOver.Overlays["vda"], drImage).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}

	newDir := filepath.Join(s.dir, "new-site")
	if err := os.MkdirAll(newDir, 0o700); err != nil {
		t.Fatal(err)
	}
	taken := filepath.Join(newDir, "disk-vda.qcow2")
	if err := os.WriteFile(taken, []byte("someone's"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := FailbackTo(ctx, vm, newDir, nil); err == nil {
		t.Fatal("a failback onto an existing file was not refused")
	}
	if b, _ := os.ReadFile(taken); string(b) != "someone's" {
		t.Fatalf("the existing file was changed: %q", b)
	}
	if st, _ := replica.LoadState(vm.Dir); st.FailedOver == nil {
		t.Fatal("the refused failback cleared the failover")
	}
	_ = os.Remove(taken)

	res, err := FailbackTo(ctx, vm, newDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != "new-location" || res.Disks["vda"] != taken || res.BytesWritten == 0 || res.BytesWritten > res.BytesRead {
		t.Fatalf("the failback to a new location: %+v", res)
	}
	t.Logf("failback to a new location: %d bytes written of %d read", res.BytesWritten, res.BytesRead)
	compare(t, taken, drImage, "the new disk")
	if got := fileSum(t, s.disks[0]); got != original {
		t.Fatal("the original disk changed")
	}
	if parts, _ := filepath.Glob(filepath.Join(newDir, "*.part")); len(parts) != 0 {
		t.Fatalf("parts left: %v", parts)
	}
	if st, _ := replica.LoadState(vm.Dir); st.FailedOver != nil {
		t.Fatal("the standby is still marked failed over")
	}
	if _, err := os.Stat(started.Dir); !os.IsNotExist(err) {
		t.Fatalf("the DR VM's overlays remain: %v", err)
	}
	img, _ := guestvm.Build(ctx)
	back, err := guestvm.Start(ctx, img, guestvm.Options{Name: "web-0", Dir: filepath.Join(s.dir, "back"), Mode: "write", Base: 64,
		Disks: []guestvm.Disk{{ID: "vda", Path: taken, Format: "qcow2"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(back.Kill)
	if _, err := back.WaitConsole(ctx, "COFFER CHECK OK"); err != nil {
		t.Fatalf("%v\n%s", err, back.Console())
	}
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	var out [32]byte
	copy(out[:], h.Sum(nil))
	return out
}
