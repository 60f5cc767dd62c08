package storagesnap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// datastore makes a datastore directory with a qcow2 and a raw disk
// whose first MiB holds pattern.
func datastore(t *testing.T, root string, pattern byte) []hypervisor.DiskInfo {
	t.Helper()
	testutil.RequireBinary(t, "qemu-img")
	testutil.RequireBinary(t, "qemu-io")
	testutil.RequireBinary(t, "qemu-nbd")
	if err := os.MkdirAll(filepath.Join(root, "web"), 0o755); err != nil {
		t.Fatal(err)
	}
	var disks []hypervisor.DiskInfo
	for _, d := range []struct{ path, format string }{{filepath.Join(root, "web", "vda.qcow2"), "qcow2"}, {filepath.Join(root, "vdb.raw"), "raw"}} {
		run(t, "qemu-img", "create", "-q", "-f", d.format, d.path, "16M")
		writePattern(t, d.path, d.format, pattern)
		disks = append(disks, hypervisor.DiskInfo{Key: filepath.Base(d.path), Name: filepath.Base(d.path), Size: 16 << 20,
			Datastore: filepath.Dir(d.path), Path: d.path, Format: d.format})
	}
	return disks
}

func writePattern(t *testing.T, path, format string, pattern byte) {
	t.Helper()
	run(t, "qemu-io", "-f", format, "-c", fmt.Sprintf("write -P 0x%02x 0 1M", pattern), path)
}

func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v %s", name, args, err, out)
	}
	return string(out)
}

func reflinkProvider() policy.StorageProvider {
	return policy.StorageProvider{Name: "xfs", Kind: "reflink", Connections: []string{"lab"}}
}

// readsPattern opens a disk in the snapshot and checks that its first MiB
// holds pattern and that only that MiB is allocated.
func readsPattern(t *testing.T, ss hypervisor.StorageSnapshot, d hypervisor.DiskInfo, pattern byte) {
	t.Helper()
	ctx := context.Background()
	r, err := ss.OpenDisk(ctx, hypervisor.VMRef{Name: "web"}, d)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Size() != d.Size {
		t.Fatalf("%s: size %d, want %d", d.Name, r.Size(), d.Size)
	}
	buf := make([]byte, 1<<20)
	if _, err := r.ReadAt(buf, 0); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf, bytes.Repeat([]byte{pattern}, len(buf))) {
		t.Fatalf("%s: the snapshot does not hold pattern 0x%02x (first byte 0x%02x)", d.Name, pattern, buf[0])
	}
	alloc, err := r.Allocated(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, e := range alloc {
		n += e.Length
	}
	if n < 1<<20 || n >= d.Size {
		t.Fatalf("%s: allocated %d bytes (%v), want the written MiB and not the whole disk", d.Name, n, alloc)
	}
}

func TestReflinkSnapshotHoldsTheInstant(t *testing.T) {
	mnt := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	holdsTheInstant(t, reflinkProvider(), filepath.Join(mnt, "vms"))
}

// holdsTheInstant snapshots a datastore, changes its disks, reads the
// snapshot's disks as they were, and deletes the snapshot.
func holdsTheInstant(t *testing.T, p policy.StorageProvider, root string) {
	state := t.TempDir()
	disks := datastore(t, root, 0x11)
	ctx := context.Background()
	if err := Check(ctx, p, root); err != nil {
		t.Fatal(err)
	}
	ss, err := Create(ctx, p, root, state, "coffer-job1-vms-1", disks)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(journalPath(state, "coffer-job1-vms-1")); err != nil {
		t.Fatalf("no journal while the snapshot exists: %v", err)
	}
	for _, d := range disks {
		writePattern(t, d.Path, d.Format, 0x22) // production goes on
	}
	for _, d := range disks {
		readsPattern(t, ss, d, 0x11)
	}
	if err := ss.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := ss.Delete(ctx); err != nil {
		t.Fatalf("Delete is not idempotent: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, SnapDir, "coffer-job1-vms-1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("snapshot directory still there after Delete: %v", err)
	}
	if _, err := os.Stat(journalPath(state, "coffer-job1-vms-1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("journal still there after Delete: %v", err)
	}
	if _, err := ss.OpenDisk(ctx, hypervisor.VMRef{Name: "web"}, disks[0]); err == nil {
		t.Fatal("a deleted snapshot opened a disk")
	}
	for _, d := range disks { // the originals are production's, untouched
		out := run(t, "qemu-io", "-f", d.Format, "-c", "read -P 0x22 0 1M", d.Path)
		if strings.Contains(out, "Pattern verification failed") {
			t.Fatalf("%s changed: %s", d.Path, out)
		}
	}
}

func TestReflinkRefusesAFilesystemWithoutReflinks(t *testing.T) {
	mnt := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=0")
	root := filepath.Join(mnt, "vms")
	state := t.TempDir()
	disks := datastore(t, root, 0x11)
	ctx := context.Background()
	err := Check(ctx, reflinkProvider(), root)
	if !errors.Is(err, hypervisor.ErrStorageUnsupported) || !strings.Contains(err.Error(), "reflink=1") {
		t.Fatalf("Check: %v, want ErrStorageUnsupported naming reflink=1", err)
	}
	_, err = Create(ctx, reflinkProvider(), root, state, "coffer-job1-vms-1", disks)
	if !errors.Is(err, hypervisor.ErrStorageUnsupported) || !strings.Contains(err.Error(), "storage-fallback: vm") {
		t.Fatalf("Create: %v, want ErrStorageUnsupported with what to do", err)
	}
	if _, err := os.Stat(filepath.Join(root, SnapDir, "coffer-job1-vms-1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed snapshot left its directory: %v", err)
	}
	if _, err := os.Stat(journalPath(state, "coffer-job1-vms-1")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a failed snapshot left its journal: %v", err)
	}
}

func TestCreateRefusesBadInput(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	state := t.TempDir()
	for _, tc := range []struct {
		label string
		disks []hypervisor.DiskInfo
		want  string
	}{
		{"job1", nil, "must be coffer-"},
		{"coffer-../../etc", nil, "must be coffer-"},
		{"coffer-a", []hypervisor.DiskInfo{{Path: "/elsewhere/disk.raw"}}, "not below datastore"},
		{"coffer-a", []hypervisor.DiskInfo{{Path: filepath.Join(root, SnapDir, "coffer-b", "d.raw")}}, "inside coffer's snapshot directory"},
	} {
		_, err := Create(ctx, reflinkProvider(), root, state, tc.label, tc.disks)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("label %q disks %v: %v, want %q", tc.label, tc.disks, err, tc.want)
		}
	}
	if left, _ := os.ReadDir(filepath.Join(state, "storage-snapshots")); len(left) > 0 {
		t.Fatalf("refused input left journals: %v", left)
	}
}

// The kill loop: a child process creates and deletes a snapshot and is
// killed (SIGKILL) at one step; the next start's Cleanup leaves nothing of
// it, and keeps what is not coffer's.
func TestReflinkKilledAtEveryStepLeavesNothing(t *testing.T) {
	mnt := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	killLoop(t, "reflink", filepath.Join(mnt, "vms"), nil, []string{"journaled#1", "dir#1", "clone#1", "clone#2", "created#1", "deleting#1", "deleted#1"})
}

func killLoop(t *testing.T, kind, root string, env []string, steps []string) {
	disks := datastore(t, root, 0x11)
	// Not coffer's, or not journaled: never touched.
	decoy := filepath.Join(root, SnapDir, "coffer-decoy")
	if err := os.MkdirAll(decoy, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(decoy, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, at := range steps {
		t.Run(at, func(t *testing.T) {
			state := t.TempDir()
			label := "coffer-kill-" + strings.ReplaceAll(at, "#", "-")
			killAt(t, kind, root, state, label, at, disks, env)
			left, err := Cleanup(context.Background(), state)
			if err != nil {
				t.Fatal(err)
			}
			if len(left) != 1 || left[0].Name != label {
				t.Fatalf("cleanup reported %v, want the snapshot %s", left, label)
			}
			assertNoLeftovers(t, root, state, label)
			if _, err := os.Stat(filepath.Join(decoy, "keep")); err != nil {
				t.Fatalf("cleanup touched a directory that is not its own: %v", err)
			}
			for _, d := range disks {
				if out := run(t, "qemu-io", "-f", d.Format, "-c", "read -P 0x11 0 1M", d.Path); strings.Contains(out, "failed") {
					t.Fatalf("%s changed: %s", d.Path, out)
				}
			}
		})
	}
}

func assertNoLeftovers(t *testing.T, root, state, label string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(root, SnapDir, label)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("snapshot %s left after cleanup: %v", label, err)
	}
	if left, _ := os.ReadDir(filepath.Join(state, "storage-snapshots")); len(left) > 0 {
		t.Fatalf("journals left after cleanup: %v", left)
	}
	if again, err := Cleanup(context.Background(), state); err != nil || len(again) > 0 {
		t.Fatalf("a second cleanup found %v, %v", again, err)
	}
}

// killAt runs the helper process until it reports being at step at, then
// kills it with SIGKILL.
func killAt(t *testing.T, kind, root, state, label, at string, disks []hypervisor.DiskInfo, env []string) {
	t.Helper()
	var paths []string
	for _, d := range disks {
		paths = append(paths, d.Path+"="+d.Format)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "STORAGESNAP_HELPER=1", "STORAGESNAP_KIND="+kind, "STORAGESNAP_ROOT="+root,
		"STORAGESNAP_STATE="+state, "STORAGESNAP_LABEL="+label, "STORAGESNAP_AT="+at, "STORAGESNAP_DISKS="+strings.Join(paths, ","))
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make([]byte, 256)
	n, _ := out.Read(line)
	if got := string(line[:n]); !strings.HasPrefix(got, "AT "+at) {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("helper did not reach %s: %q %s", at, got, stderr.String())
	}
	cmd.Process.Kill()
	cmd.Wait()
}

// TestHelperProcess is the process the kill loop kills; it does nothing
// in a normal test run.
func TestHelperProcess(t *testing.T) {
	if os.Getenv("STORAGESNAP_HELPER") != "1" {
		return
	}
	at := os.Getenv("STORAGESNAP_AT")
	seen := map[string]int{}
	killPoint = func(s string) {
		seen[s]++
		if fmt.Sprintf("%s#%d", s, seen[s]) == at {
			fmt.Printf("AT %s\n", at)
			os.Stdout.Sync()
			select {} // killed here
		}
	}
	var disks []hypervisor.DiskInfo
	for _, p := range strings.Split(os.Getenv("STORAGESNAP_DISKS"), ",") {
		path, format, _ := strings.Cut(p, "=")
		disks = append(disks, hypervisor.DiskInfo{Path: path, Format: format})
	}
	if os.Getenv("STORAGESNAP_MODE") == "retain" { // the end of a run of policy nightly with keep 0
		if _, err := RetainKept(context.Background(), os.Getenv("STORAGESNAP_STATE"), "nightly", "lab", 0); err != nil {
			fmt.Printf("ERROR %v\n", err)
			os.Exit(1)
		}
		fmt.Println("DONE")
		os.Exit(0)
	}
	p := policy.StorageProvider{Name: "p", Kind: os.Getenv("STORAGESNAP_KIND"), Connections: []string{"lab"}}
	if p.Kind == "exec" {
		p.Command = strings.Fields(os.Getenv("STORAGESNAP_COMMAND"))
		p.Timeout = policy.Duration(time.Minute)
	}
	ss, err := Create(context.Background(), p, os.Getenv("STORAGESNAP_ROOT"), os.Getenv("STORAGESNAP_STATE"), os.Getenv("STORAGESNAP_LABEL"), disks)
	if err != nil {
		fmt.Printf("ERROR %v\n", err)
		os.Exit(1)
	}
	if os.Getenv("STORAGESNAP_MODE") == "keep" {
		err = keepThenForget(ss, os.Getenv("STORAGESNAP_STATE"), os.Getenv("STORAGESNAP_LABEL"))
	} else {
		err = ss.Delete(context.Background())
	}
	if err != nil {
		fmt.Printf("ERROR %v\n", err)
		os.Exit(1)
	}
	fmt.Println("DONE")
	os.Exit(0)
}
