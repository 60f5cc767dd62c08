package libvirt_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/libvirt"
	"github.com/coffer-backup/coffer/internal/repo"
)

// TestInventory lists the lab's domain running and shut off, and backs it
// up shut off (checkOffline).
func TestInventory(t *testing.T) {
	l := startLab(t)
	vms, err := l.conn.Inventory(l.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vms) != 1 {
		t.Fatalf("inventory: %+v", vms)
	}
	vm := vms[0]
	host, _ := os.Hostname()
	if vm.ID != domUUID || vm.Name != domName || vm.PowerState != "running" || vm.Host != host {
		t.Fatalf("inventory entry: %+v (host %s)", vm, host)
	}
	if !vm.GuestAgent {
		t.Fatal("the guest agent's channel is connected, inventory says no agent")
	}
	if vm.ChangeTracking {
		t.Fatal("vdb is raw, which holds no checkpoint bitmap: change tracking cannot be on for all disks")
	}
	want := []hypervisor.DiskInfo{
		{Key: "vda", Name: "vda", Size: 32 << 20, Datastore: "images", Path: filepath.Join(l.dir, "vda.qcow2"), Format: "qcow2"},
		{Key: "vdb", Name: "vdb", Size: 32 << 20, Datastore: "images", Path: filepath.Join(l.dir, "vdb.raw"), Format: "raw"},
	}
	if !slices.Equal(vm.Disks, want) || !slices.Equal(vm.Datastores, []string{"images"}) {
		t.Fatalf("disks %+v datastores %v, want %+v in pool images", vm.Disks, vm.Datastores, want)
	}
	// A shut-off domain is listed, and backed up from its images
	// (checkOffline), after a live full of its chain.
	if _, err := l.backup("o", "full", hypervisor.CrashConsistent); err != nil {
		t.Fatal(err)
	}
	l.waitWrites(1)
	if err := l.admin.DomainDestroy(l.dom); err != nil {
		t.Fatal(err)
	}
	if vms, err = l.conn.Inventory(l.ctx); err != nil || len(vms) != 1 || vms[0].PowerState != "stopped" {
		t.Fatalf("after destroy: %+v %v", vms, err)
	}
	l.checkOffline(t)
}

// TestBackupsFullIncrementalDifferential backs up a writing guest (after
// its disk counters are read through a session, checkBlockStats): a full,
// incrementals with the guest writing in between (one compared byte for
// byte with the disk at its instant, one booted by boot verification,
// checkBootVerification), a differential, a second chain
// interleaved, and an administrator's own checkpoint that coffer leaves
// alone.
func TestBackupsFullIncrementalDifferential(t *testing.T) {
	l := startLab(t)
	t.Run("BlockStats", l.checkBlockStats) // latency-control's source, before the chains start
	full, err := l.backup("a", "", hypervisor.Quiesced)
	if err != nil {
		t.Fatalf("full: %v\n%s", err, l.console())
	}
	if full.Mode != "full" || len(full.Disks) != 2 || full.SnapshotModeAchieved != "quiesced" {
		t.Fatalf("full: mode %s, %d disks, achieved %q", full.Mode, len(full.Disks), full.SnapshotModeAchieved)
	}
	l.assertClean()
	rep := l.checkWorkload(l.restoreDisk(full, "vda"))
	cpA := chainCheckpoints(l.checkpoints(), "a")
	if len(cpA) != 1 || !strings.Contains(cpA[0], "-full-") {
		t.Fatalf("checkpoints after the full: %v", l.checkpoints())
	}
	// An administrator's checkpoint, and another chain's full, between
	// chain a's points.
	l.virsh("checkpoint-create-as", domName, "admin-keep", "--diskspec", "vda,checkpoint=bitmap", "--diskspec", "vdb,checkpoint=no")
	if _, err := l.backup("b", "full", hypervisor.CrashConsistent); err != nil {
		t.Fatal(err)
	}
	l.waitWrites(2)

	// The incremental with the guest paused around it, so the restored
	// image can be compared with the disk at the snapshot instant.
	if err := l.admin.DomainSuspend(l.dom); err != nil {
		t.Fatal(err)
	}
	truth := l.liveImage()
	inc, err := l.backup("a", "incremental", hypervisor.CrashConsistent)
	if rerr := l.admin.DomainResume(l.dom); err != nil || rerr != nil {
		t.Fatal(err, rerr)
	}
	if inc.Mode != "full" { // vdb is raw: read in full, so the point is full
		t.Fatalf("incremental with a raw disk: point mode %s", inc.Mode)
	}
	if got := l.restoreDisk(inc, "vda"); !bytes.Equal(got, truth) {
		t.Fatal("incremental point differs from the disk at its instant")
	}
	// vda was read through chain a's checkpoint. How much that is depends
	// on how long the guest wrote since the full (longer on a busy
	// machine), so it is bounded by the disk, not by the full's bytes.
	if d := diskOf(inc, "vda"); d.Mode != "incremental" || d.Warning != "" || d.BytesRead == 0 || d.BytesRead >= d.Size {
		t.Fatalf("incremental of vda: %s (%q), read %d of %d bytes", d.Mode, d.Warning, d.BytesRead, d.Size)
	}
	all := l.checkpoints()
	cpA = chainCheckpoints(all, "a")
	if len(cpA) != 2 || len(chainCheckpoints(all, "b")) != 1 || !slices.Contains(all, "admin-keep") {
		t.Fatalf("checkpoints after chain a's incremental: %v", all)
	}

	l.waitWrites(2)
	inc2, err := l.backup("a", "incremental", hypervisor.CrashConsistent)
	if err != nil {
		t.Fatal(err)
	}
	if rep2 := l.checkWorkload(l.restoreDisk(inc2, "vda")); rep2.Written < rep.Written {
		t.Fatalf("incremental lost writes: %+v after %+v", rep2, rep)
	}
	t.Run("BootVerification", func(t *testing.T) { l.checkBootVerification(t, inc2) })
	diff, err := l.backup("a", "differential", hypervisor.Suspend)
	if err != nil {
		t.Fatal(err)
	}
	if diff.SnapshotModeAchieved != "suspend" {
		t.Fatalf("differential with suspend achieved %q", diff.SnapshotModeAchieved)
	}
	l.checkWorkload(l.restoreDisk(diff, "vda"))
	l.assertClean()
	all = l.checkpoints()
	cpA = chainCheckpoints(all, "a")
	// The full anchor and the latest incremental; the differential made
	// none. Chain b's full and the administrator's checkpoint untouched.
	if len(cpA) != 2 || !strings.Contains(strings.Join(cpA, " "), "-full-") || len(chainCheckpoints(all, "b")) != 1 || !slices.Contains(all, "admin-keep") {
		t.Fatalf("checkpoints at the end: %v", all)
	}
	t.Logf("checkpoints: %v", all)

	// Chain b's incremental, after all of chain a's points, reads only
	// what changed since b's own full.
	incB, err := l.backup("b", "incremental", hypervisor.CrashConsistent)
	if err != nil {
		t.Fatal(err)
	}
	if d := diskOf(incB, "vda"); d.Mode != "incremental" || d.Warning != "" || d.BytesRead >= d.Size {
		t.Fatalf("chain b's incremental of vda: %s (%q), read %d of %d bytes", d.Mode, d.Warning, d.BytesRead, d.Size)
	}
	l.checkWorkload(l.restoreDisk(incB, "vda"))

	// Forty days on, chain a backs up again: chain b, unused since, loses
	// its checkpoints; the administrator's stays.
	later, err := libvirt.New(libvirt.Config{URI: l.d.URI, StateDir: l.state,
		Now: func() time.Time { return time.Now().Add(40 * 24 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	defer later.Close()
	l.conn = later
	if _, err := l.backup("a", "incremental", hypervisor.CrashConsistent); err != nil {
		t.Fatal(err)
	}
	all = l.checkpoints()
	if len(chainCheckpoints(all, "a")) != 2 || len(chainCheckpoints(all, "b")) != 0 || !slices.Contains(all, "admin-keep") {
		t.Fatalf("checkpoints after chain b expired: %v", all)
	}
}

// diskOf is one disk of a point.
func diskOf(s *repo.Point, key string) repo.Disk {
	for _, d := range s.Disks {
		if d.Key == key {
			return d
		}
	}
	return repo.Disk{}
}

func TestWithMemoryRefused(t *testing.T) {
	l := startLab(t)
	_, err := l.conn.Snapshot(l.ctx, l.ref, hypervisor.SnapshotRequest{SessionID: "mem", Mode: hypervisor.WithMemory})
	if !errors.Is(err, hypervisor.ErrUnsupported) || !strings.Contains(err.Error(), "memory") {
		t.Fatalf("with-memory: %v", err)
	}
	l.assertClean()
	if cps := l.checkpoints(); len(cps) != 0 {
		t.Fatalf("a refused snapshot left checkpoints %v", cps)
	}
}
