package storagesnap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// What the storage says changed between a kept snapshot and a newer one,
// on both providers that keep files: every range written in between is
// reported (an overwrite in place, a new allocation, a discard to zeros),
// and little else (a granule around each), for a qcow2 and a raw disk.
func TestChangedSinceAKeptSnapshot(t *testing.T) {
	t.Run("reflink", func(t *testing.T) {
		mnt := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
		changedSince(t, reflinkProvider(), mnt+"/vms")
	})
	t.Run("btrfs", func(t *testing.T) {
		_, root := btrfsDatastore(t)
		changedSince(t, btrfsProvider(), root)
	})
	// A site's array through the exec contract, played by the test's
	// script on a reflink filesystem: first compared by the presented
	// files' extent maps, then by the script's own "changed" answer.
	t.Run("exec-fiemap", func(t *testing.T) {
		mnt := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
		p, _, _ := array(t, mnt)
		changedSince(t, p, mnt+"/vms")
	})
	t.Run("exec-changed", func(t *testing.T) {
		testutil.RequireBinary(t, "cmp")
		mnt := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
		p, _, _ := array(t, mnt)
		p.Changes = true
		changedSince(t, p, mnt+"/vms")
	})
}

// TestExecChangedAnswersAreChecked: a provider whose "changed" action
// fails or prints something else than ranges gives no change set (the
// disk is then read in full), with the reason.
func TestExecChangedAnswersAreChecked(t *testing.T) {
	mnt := testutil.MountLoopFS(t, "xfs", 320<<20, "-q", "-m", "reflink=1")
	p, _, _ := array(t, mnt)
	p.Changes = true
	root := mnt + "/vms"
	ctx := context.Background()
	disks, state, vm := keptBase(t, p, root)
	for i, c := range []struct{ script, want string }{
		{"echo 'a lot'", `changed printed "a lot" on line 1`},
		{"echo '0 -5'", `changed printed "0 -5"`},
		{"echo 'array offline' >&2; exit 4", "array offline"},
	} {
		// The same provider, whose "changed" action now answers c.script.
		wrap := filepath.Join(t.TempDir(), "wrap.sh")
		body := fmt.Sprintf("#!/bin/sh\nif [ \"$1\" = changed ]; then %s; exit 0; fi\nexec %q \"$@\"\n", c.script, p.Command[0])
		if err := os.WriteFile(wrap, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		q := p
		q.Command = []string{wrap}
		label := fmt.Sprintf("coffer-job2-%d", i)
		newer, err := Create(ctx, q, root, state, label, disks)
		if err != nil {
			t.Fatal(err)
		}
		_, _, err = newer.(hypervisor.StorageChangeTracker).ChangedSince(ctx, 1, vm, disks[0])
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("changed answering %q: %v, want %q", c.script, err, c.want)
		}
		if err := newer.Delete(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// keptBase makes a datastore of two disks (16 MiB each, the first MiB
// written) and keeps a storage snapshot of it as job 1's, "coffer-job1-a".
func keptBase(t *testing.T, p policy.StorageProvider, root string) ([]hypervisor.DiskInfo, string, hypervisor.VMRef) {
	ctx := context.Background()
	disks := datastore(t, root, 0x11)
	state := t.TempDir()
	vm := hypervisor.VMRef{Name: "web-1", ID: "u-1"}
	older, err := Create(ctx, p, root, state, "coffer-job1-a", disks)
	if err != nil {
		t.Fatal(err)
	}
	if err := older.(hypervisor.StorageKeeper).Keep(ctx, hypervisor.KeptSnapshot{Policy: "zdb", JobID: 1, VMs: []hypervisor.KeptVM{{VMRef: vm, Disks: disks}}}); err != nil {
		t.Fatal(err)
	}
	return disks, state, vm
}

func changedSince(t *testing.T, p policy.StorageProvider, root string) {
	ctx := context.Background()
	disks, state, vm := keptBase(t, p, root)
	// Production writes: in place inside the written MiB, a new range far
	// out, and zeros over data.
	writes := []hypervisor.Extent{{Offset: 256 << 10, Length: 64 << 10}, {Offset: 9 << 20, Length: 128 << 10}, {Offset: 512 << 10, Length: 64 << 10}}
	for _, d := range disks {
		for i, w := range writes {
			cmd := fmt.Sprintf("write -P 0x33 %d %d", w.Offset, w.Length)
			if i == 2 {
				cmd = fmt.Sprintf("write -z %d %d", w.Offset, w.Length)
			}
			run(t, "qemu-io", "-f", d.Format, "-c", cmd, d.Path)
		}
	}
	newer, err := Create(ctx, p, root, state, "coffer-job2-b", disks)
	if err != nil {
		t.Fatal(err)
	}
	defer newer.Delete(ctx)
	tracker := newer.(hypervisor.StorageChangeTracker)
	for _, d := range disks {
		got, base, err := tracker.ChangedSince(ctx, 1, vm, d)
		if err != nil || base != "coffer-job1-a" {
			t.Fatalf("%s: %v, base %q", d.Path, err, base)
		}
		var total int64
		for _, w := range writes {
			if !covered(got, w) {
				t.Fatalf("%s: write %+v not in the change set %+v", d.Format, w, got)
			}
			total += w.Length
		}
		var n int64
		for _, e := range got {
			n += e.Length
		}
		// A qcow2 write of a new cluster also moves nothing else; allow a
		// granule on each side of each write.
		if n > total+int64(len(writes))*2*changeGranule {
			t.Fatalf("%s: %d bytes reported changed for %d written: %+v", d.Format, n, total, got)
		}
		t.Logf("%s: %d bytes reported changed for %d written", d.Format, n, total)
	}
	// A job whose snapshot was not kept, or a disk it does not hold.
	if _, _, err := tracker.ChangedSince(ctx, 7, vm, disks[0]); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Fatalf("no kept snapshot of job 7: %v", err)
	}
	if _, _, err := tracker.ChangedSince(ctx, 1, hypervisor.VMRef{Name: "db-1", ID: "u-2"}, disks[0]); !errors.Is(err, hypervisor.ErrNotFound) {
		t.Fatalf("a VM the kept snapshot does not hold: %v", err)
	}
	if _, err := Forget(ctx, state, "coffer-job1-a"); err != nil {
		t.Fatal(err)
	}
}

func covered(ext []hypervisor.Extent, w hypervisor.Extent) bool {
	for _, e := range ext {
		if e.Offset <= w.Offset && e.Offset+e.Length >= w.Offset+w.Length {
			return true
		}
	}
	return false
}

// The comparison of two maps of device blocks, by hand: the same blocks
// split differently are the same; a hole against data, another block, or
// an address that does not identify its data are not.
func TestSameRuns(t *testing.T) {
	exts := []physExtent{{0, 1000, 100, true}, {100, 2000, 100, true}, {300, 5000, 100, false}}
	for _, c := range []struct {
		name     string
		a, b     []physRun
		wantSame bool
	}{
		{"one extent or two", runs(exts, 0, 100), []physRun{{1000, 60}, {1060, 40}}, true},
		{"hole and hole", runs(exts, 200, 100), []physRun{{-1, 100}}, true},
		{"hole and data", runs(exts, 150, 100), []physRun{{2050, 100}}, false},
		{"other blocks", runs(exts, 0, 50), []physRun{{1001, 50}}, false},
		{"untrusted address", runs(exts, 300, 50), runs(exts, 300, 50), false},
	} {
		if got := sameRuns(c.a, c.b); got != c.wantSame {
			t.Errorf("%s: %v against %v: same %v, want %v", c.name, c.a, c.b, got, c.wantSame)
		}
	}
}
