package vsphere

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
)

func (l *hostLab) ref() hypervisor.VMRef { return hypervisor.VMRef{ID: l.vm.Value, Name: "vm-0000"} }

func backupLab(t *testing.T, l *hostLab, r *repo.Repository, c *Connector) (*repo.Point, []string, error) {
	t.Helper()
	return backupLabMode(t, l, r, c, hypervisor.CrashConsistent)
}

// backupLabMode backs the lab's VM up with a snapshot mode; it returns the
// point and the task log's notes (the route of each disk).
func backupLabMode(t *testing.T, l *hostLab, r *repo.Repository, c *Connector, mode hypervisor.SnapshotMode) (*repo.Point, []string, error) {
	t.Helper()
	ctx := context.Background()
	w, err := r.NewWriter(ctx, "vm")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	var notes []string
	snap, err := backup.BackupVM(ctx, w, c, backup.VMRequest{Connection: "vc", VM: l.ref(),
		SnapshotMode: mode, Quiesce: hypervisor.QuiesceFallback},
		backup.Options{Note: func(m string) { notes = append(notes, m) }})
	return snap, notes, err
}

// TestReadsFromTheHostWithServiceTickets: a backup through vCenter reads
// every disk byte from the ESXi host's /folder service, each request
// carrying a one-time ticket vCenter issued for exactly that request, and
// vCenter's /folder serves nothing; the point restores to the disk.
func TestReadsFromTheHostWithServiceTickets(t *testing.T) {
	l := startHostLab(t, 8<<20)
	c := l.connect(t, nil)
	r := newRepo(t)
	snap, notes, err := backupLab(t, l, r, c)
	if err != nil {
		t.Fatal(err)
	}
	l.logRoutes(t, "read-from: host, tickets")
	if got := restoreBytes(t, r, snap); !bytes.Equal(got, l.data) {
		t.Fatal("the restored disk differs from the VM's disk")
	}
	if n := l.vc.folderBytes.Load(); n != 0 {
		t.Fatalf("vCenter's /folder served %d bytes; want none", n)
	}
	if n := l.host.folderBytes.Load(); n < int64(len(l.data)) {
		t.Fatalf("the host's /folder served %d bytes, less than the disk's %d", n, len(l.data))
	}
	l.book.mu.Lock()
	issued := l.book.count
	l.book.mu.Unlock()
	if l.host.refused.Load() != 0 || l.host.used != int(l.host.folderRequests.Load()) || l.host.used == 0 || issued != l.host.used {
		t.Fatalf("host: %d requests, %d with a valid unused ticket, %d refused; %d tickets issued", l.host.folderRequests.Load(), l.host.used, l.host.refused.Load(), issued)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "from ESXi host "+l.hostName) || !strings.Contains(notes[0], "service tickets") {
		t.Fatalf("task log notes %q", notes)
	}
	if w := strings.Join(snap.Warnings, "; "); strings.Contains(w, "vCenter") {
		t.Fatalf("warnings %v", w)
	}
}

// TestReadFromVCenterForcesTheOldPath: read-from: vcenter sends every byte
// through vCenter and none from the host.
func TestReadFromVCenterForcesTheOldPath(t *testing.T) {
	l := startHostLab(t, 4<<20)
	c := l.connect(t, func(c *Config) { c.ReadFrom = ReadFromVCenter })
	r := newRepo(t)
	snap, notes, err := backupLab(t, l, r, c)
	if err != nil {
		t.Fatal(err)
	}
	l.logRoutes(t, "read-from: vcenter")
	if !bytes.Equal(restoreBytes(t, r, snap), l.data) {
		t.Fatal("the restored disk differs")
	}
	if l.host.folderRequests.Load() != 0 || l.vc.folderBytes.Load() < int64(len(l.data)) {
		t.Fatalf("host served %d requests, vCenter %d bytes", l.host.folderRequests.Load(), l.vc.folderBytes.Load())
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "read-from: vcenter") {
		t.Fatalf("notes %q", notes)
	}

	nv, err := restoreLab(t, r, c, snap, "vm-0000-restored")
	if err != nil {
		t.Fatal(err)
	}
	l.logRoutes(t, "restore, read-from: vcenter")
	checkUploads(t, l.vc, l.host, len(l.data), "restore, read-from: vcenter")
	if l.host.folderRequests.Load() != 0 || !bytes.Equal(l.restoredFlat(t, nv), l.data) {
		t.Fatalf("restore: host served %d requests; disk equal %v", l.host.folderRequests.Load(), bytes.Equal(l.restoredFlat(t, nv), l.data))
	}
	if len(nv.notes) != 1 || !strings.Contains(nv.notes[0], "written through vCenter's datastore service (read-from: vcenter)") || len(nv.warnings) != 0 {
		t.Fatalf("restore notes %q, warnings %q", nv.notes, nv.warnings)
	}
}

// TestUnreachableHost: with read-from: host a host coffer cannot reach is
// read through vCenter, and a restore written through it, with a warning
// that says why; with host-only the backup fails and says so, and so does
// the restore, leaving neither the new VM nor its files.
func TestUnreachableHost(t *testing.T) {
	l := startHostLab(t, 4<<20)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens there now
	unreachable := func(c *Config) { c.HostAddresses = map[string]string{l.hostName: dead} }

	c := l.connect(t, unreachable)
	r := newRepo(t)
	snap, notes, err := backupLab(t, l, r, c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(restoreBytes(t, r, snap), l.data) {
		t.Fatal("the restored disk differs")
	}
	w := strings.Join(snap.Warnings, "; ")
	if !strings.Contains(w, "read through vCenter, not from its ESXi host") || !strings.Contains(w, dead) {
		t.Fatalf("warnings %q", w)
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "the host could not be used") || l.vc.folderBytes.Load() < int64(len(l.data)) {
		t.Fatalf("notes %q, vCenter bytes %d", notes, l.vc.folderBytes.Load())
	}
	nv, err := restoreLab(t, r, c, snap, "fallback")
	if err != nil {
		t.Fatal(err)
	}
	checkUploads(t, l.vc, l.host, len(l.data), "restore, host unreachable")
	if !bytes.Equal(l.restoredFlat(t, nv), l.data) {
		t.Fatal("the disk restored through vCenter differs")
	}
	if len(nv.warnings) != 1 || !strings.Contains(nv.warnings[0], "written through vCenter, not to its ESXi host") || !strings.Contains(nv.warnings[0], dead) {
		t.Fatalf("restore warnings %q", nv.warnings)
	}

	strict := l.connect(t, func(c *Config) { unreachable(c); c.ReadFrom = ReadFromHostOnly })
	before := l.vc.folderBytes.Load()
	_, _, err = backupLab(t, l, newRepo(t), strict)
	if err == nil || !strings.Contains(err.Error(), "host-only") {
		t.Fatalf("host-only with an unreachable host: %v", err)
	}
	if l.vc.folderBytes.Load() != before {
		t.Fatal("host-only read through vCenter")
	}
	if vm := l.s.vm(l.vm); vm.Snapshot != nil && cofferSnapshot(vm.Snapshot) != nil {
		t.Fatal("the failed backup left its snapshot")
	}

	uploaded := l.vc.folderUploaded.Load()
	if _, err := restoreLab(t, r, strict, snap, "strict"); err == nil || !strings.Contains(err.Error(), "host-only") || !strings.Contains(err.Error(), dead) {
		t.Fatalf("host-only restore with an unreachable host: %v", err)
	}
	l.goneWithoutTrace(t, strict, "strict")
	if l.vc.folderUploaded.Load() != uploaded || l.host.folderRequests.Load() != 0 {
		t.Fatal("the host-only restore wrote through vCenter, or reached the host")
	}
}

// TestReadsFromTheHostWithItsOwnLogin: with host credentials coffer logs
// in to the host and needs no ticket from vCenter; a wrong host password
// is refused with what failed.
func TestReadsFromTheHostWithItsOwnLogin(t *testing.T) {
	l := startHostLab(t, 4<<20)
	pw := filepath.Join(t.TempDir(), "esx-pw")
	if err := os.WriteFile(pw, []byte(l.esxPass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := l.connect(t, func(c *Config) { c.HostUser, c.HostPasswordFile = l.esxUser, pw })
	r := newRepo(t)
	snap, notes, err := backupLab(t, l, r, c)
	if err != nil {
		t.Fatal(err)
	}
	l.logRoutes(t, "read-from: host, host login")
	if !bytes.Equal(restoreBytes(t, r, snap), l.data) {
		t.Fatal("the restored disk differs")
	}
	l.book.mu.Lock()
	issued := l.book.count
	l.book.mu.Unlock()
	if issued != 0 || l.vc.folderBytes.Load() != 0 || l.host.folderBytes.Load() < int64(len(l.data)) || l.host.refused.Load() != 0 {
		t.Fatalf("%d tickets, vCenter %d bytes, host %d bytes, %d refused", issued, l.vc.folderBytes.Load(), l.host.folderBytes.Load(), l.host.refused.Load())
	}
	if len(notes) != 1 || !strings.Contains(notes[0], "a session of the host's own") {
		t.Fatalf("notes %q", notes)
	}
	nv, err := restoreLab(t, r, c, snap, "vm-0000-restored")
	if err != nil {
		t.Fatal(err)
	}
	l.logRoutes(t, "restore, read-from: host, host login")
	checkUploads(t, l.host, l.vc, len(l.data), "restore, host login")
	l.book.mu.Lock()
	issued = l.book.count
	l.book.mu.Unlock()
	if issued != 0 || !bytes.Equal(l.restoredFlat(t, nv), l.data) || len(nv.notes) != 1 || !strings.Contains(nv.notes[0], "written to ESXi host") ||
		!strings.Contains(nv.notes[0], "a session of the host's own") {
		t.Fatalf("restore with the host login: %d tickets, notes %q", issued, nv.notes)
	}

	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("wrong\n"), 0o600)
	strict := l.connect(t, func(c *Config) { c.HostUser, c.HostPasswordFile, c.ReadFrom = l.esxUser, bad, ReadFromHostOnly })
	_, _, err = backupLab(t, l, newRepo(t), strict)
	if err == nil || !strings.Contains(err.Error(), "login to host") {
		t.Fatalf("a wrong host password: %v", err)
	}
}
