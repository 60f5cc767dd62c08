package failover

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/qmp"
	"github.com/coffer-backup/coffer/internal/replica"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestPlannedFailoverThenFailback migrates a guest that writes
// self-verifying blocks to its standby and back. The planned failover
// pauses the source, takes and replicates its final point, then starts
// the standby: its disk equals the source's at shutdown (qemu-img
// compare), the guest's own check passes at the DR site, and the standby
// refuses replication while failed over. The failback moves exactly the
// clusters the DR VM wrote (counted by qemu-img map of its overlay), the
// original disk then equals the DR VM's, and the source guest's check
// passes on it.
func TestPlannedFailoverThenFailback(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	s := newSite(t, ctx, 1, "write")
	s.replicate(0)
	src := s.vms[0]
	if _, _, err := src.WaitConsoleFrom(ctx, src.Mark(), "COFFER WROTE"); err != nil { // writes after the first point
		t.Fatal(err)
	}
	// The planned failover: the source stops, its final point is replicated.
	admin, err := qmp.Dial(ctx, src.TestQMP)
	if err != nil {
		t.Fatal(err)
	}
	if err := admin.Execute(ctx, "stop", nil, nil); err != nil {
		t.Fatal(err)
	}
	final, vm := s.replicate(0)
	_ = admin.Execute(ctx, "quit", nil, nil) // QEMU exits: the monitor closes under the answer
	<-src.Exited()
	st, err := replica.LoadState(vm.Dir)
	if err != nil {
		t.Fatal(err)
	}
	compare(t, s.disks[0], st.Newest().Disks[0].File, "the final point")
	if _, err := Planned(ctx, vm, "not-the-final-point", Options{}); !errors.Is(err, ErrNotFinal) {
		t.Fatalf("a planned failover on another point: %v", err)
	}
	started, err := Planned(ctx, vm, final.ID.String(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = StopFailedOver(context.Background(), vm, time.Second) })
	console := filepath.Join(started.Dir, "console.log")
	at := waitFile(ctx, t, console, 0, "COFFER CHECK OK")
	waitFile(ctx, t, console, at, "COFFER WROTE 32") // the DR VM writes its own blocks
	if _, err := replica.Run(ctx, s.repo, final, replica.Options{Dir: vm.Dir}); !errors.Is(err, replica.ErrFailedOver) {
		t.Fatalf("replication onto a failed-over standby: %v", err)
	}
	if _, err := Failover(ctx, vm, Options{}); !errors.Is(err, ErrAlreadyFailedOver) {
		t.Fatalf("a second failover while the VM runs: %v", err)
	}
	// Failback: what the DR VM wrote, and nothing else, goes back.
	if err := StopFailedOver(ctx, vm, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	st, _ = replica.LoadState(vm.Dir)
	overlay := st.FailedOver.Overlays["vda"]
	written := allocatedBytes(t, overlay)
	drImage := filepath.Join(t.TempDir(), "dr.raw")
	if out, err := exec.Command("qemu-img", "convert", "-U", "-O", "raw", overlay, drImage).CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	res, err := Failback(ctx, vm, map[string]string{"vda": s.disks[0]}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != "changed-at-dr" || res.BytesWritten != written || written == 0 || written > 8<<20 {
		t.Fatalf("failback wrote %d bytes (%s), the DR overlay holds %d", res.BytesWritten, res.Mode, written)
	}
	t.Logf("failback: %d bytes in %d extent(s) of a 32 MiB disk", res.BytesWritten, res.Extents)
	compare(t, s.disks[0], drImage, "the DR VM's disk")
	if st, _ = replica.LoadState(vm.Dir); st.FailedOver != nil {
		t.Fatal("the standby is still marked failed over")
	}
	if _, err := os.Stat(started.Dir); !os.IsNotExist(err) {
		t.Fatalf("the DR VM's overlays remain: %v", err)
	}
	// The original, switched back: the guest's own check passes.
	img, _ := guestvm.Build(ctx)
	back, err := guestvm.Start(ctx, img, guestvm.Options{Name: "web-0", Dir: filepath.Join(s.dir, "back"), Mode: "write", Base: 64,
		Disks: []guestvm.Disk{{ID: "vda", Path: s.disks[0], Format: "qcow2"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(back.Kill)
	if _, err := back.WaitConsole(ctx, "COFFER CHECK OK"); err != nil {
		t.Fatalf("%v\n%s", err, back.Console())
	}
}

// compare fails unless two images read the same.
func compare(t *testing.T, a, b, what string) {
	t.Helper()
	if out, err := exec.Command("qemu-img", "compare", "-U", a, b).CombinedOutput(); err != nil {
		t.Fatalf("%s: %s differs from %s: %v %s", what, a, b, err, out)
	}
}

// allocatedBytes is what a qcow2 overlay holds itself (depth 0 of its
// chain), by qemu-img map.
func allocatedBytes(t *testing.T, file string) int64 {
	t.Helper()
	out, err := exec.Command("qemu-img", "map", "-U", "--output=json", file).Output()
	if err != nil {
		t.Fatal(err)
	}
	var m []struct {
		Length int64 `json:"length"`
		Depth  int   `json:"depth"`
		Data   bool  `json:"data"`
		Zero   bool  `json:"zero"`
	}
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range m {
		if e.Depth == 0 && (e.Data || e.Zero) {
			n += e.Length
		}
	}
	return n
}

// waitFile waits for text in a file after byte offset from and returns
// where it ends. A daemonized QEMU's console log has no other change
// notification that works on every file system the tests run on.
func waitFile(ctx context.Context, t *testing.T, path string, from int, text string) int {
	t.Helper()
	testutil.RequireBinary(t, "qemu-img")
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		b, _ := os.ReadFile(path)
		if from < len(b) {
			if i := indexOf(b[from:], text); i >= 0 {
				return from + i + len(text)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %q in %s: %v\n%s", text, path, ctx.Err(), b)
		case <-tick.C:
		}
	}
}

func indexOf(b []byte, s string) int {
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return i
		}
	}
	return -1
}
