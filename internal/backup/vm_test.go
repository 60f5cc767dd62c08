package backup_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/backup/backuptest"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
)

// memConnector is a unit-test hypervisor: one VM whose disks are byte
// slices; tokens are generation numbers; writes mark 64 KiB blocks dirty
// per generation, like QEMU bitmaps.
type memConnector struct {
	mu     sync.Mutex
	disks  map[string][]byte
	gen    int
	dirty  map[int]map[string]map[int64]bool // generation -> disk -> block
	closed []bool                            // ok flag of every Close
	failOn string                            // disk key whose reads fail
	// achieved is what sessions report having done, whatever was asked.
	achieved hypervisor.SnapshotMode
}

const block = 64 << 10

func newMem(sizes map[string]int) *memConnector {
	c := &memConnector{disks: map[string][]byte{}, dirty: map[int]map[string]map[int64]bool{}}
	for k, n := range sizes {
		c.disks[k] = make([]byte, n)
	}
	return c
}

func (c *memConnector) write(disk string, off int64, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	copy(c.disks[disk][off:], data)
	for b := off / block; b*block < off+int64(len(data)); b++ {
		for g := range c.dirty {
			if c.dirty[g][disk] == nil {
				c.dirty[g][disk] = map[int64]bool{}
			}
			c.dirty[g][disk][b] = true
		}
	}
}

func (c *memConnector) Kind() string { return "mem" }
func (c *memConnector) Inventory(context.Context) ([]hypervisor.VM, error) {
	return []hypervisor.VM{{VMRef: hypervisor.VMRef{ID: "vm-1", Name: "one"}}}, nil
}
func (c *memConnector) CleanupLeftovers(context.Context) ([]hypervisor.Leftover, error) {
	return nil, nil
}

func (c *memConnector) Snapshot(_ context.Context, vm hypervisor.VMRef, req hypervisor.SnapshotRequest) (hypervisor.Session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	s := &memSession{c: c, gen: c.gen, frozen: map[string][]byte{}, achieved: c.achieved}
	c.dirty[c.gen] = map[string]map[int64]bool{} // tracks writes after this instant
	for k, d := range c.disks {
		s.frozen[k] = append([]byte(nil), d...)
		ds := hypervisor.DiskSnapshot{DiskInfo: hypervisor.DiskInfo{Key: k, Name: k, Size: int64(len(d))}, Kind: hypervisor.KindDisk,
			Changes: "full", NewToken: fmt.Sprint(c.gen)}
		if tok, ok := req.Since[k]; ok {
			var g int
			fmt.Sscan(tok, &g)
			if set, ok := c.dirty[g]; ok {
				written := set[k]
				if written == nil {
					written = map[int64]bool{} // tracked, nothing written since
				}
				s.changed = append(s.changed, written)
				ds.Changes = "incremental"
				s.disks = append(s.disks, ds)
				continue
			}
			ds.ChangeWarning = "bitmap missing"
		}
		s.changed = append(s.changed, nil)
		s.disks = append(s.disks, ds)
	}
	return s, nil
}

type memSession struct {
	c        *memConnector
	gen      int
	frozen   map[string][]byte
	disks    []hypervisor.DiskSnapshot
	changed  []map[int64]bool
	achieved hypervisor.SnapshotMode
}

func (s *memSession) Config() hypervisor.VMConfig {
	return hypervisor.VMConfig{Kind: "mem", Name: "one"}
}
func (s *memSession) Disks() []hypervisor.DiskSnapshot      { return s.disks }
func (s *memSession) Warnings() []string                    { return nil }
func (s *memSession) AchievedMode() hypervisor.SnapshotMode { return s.achieved }
func (s *memSession) Release(context.Context) error         { return nil }
func (s *memSession) Close(_ context.Context, ok bool) (map[string]string, error) {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	s.c.closed = append(s.c.closed, ok)
	if !ok {
		delete(s.c.dirty, s.gen) // as if the backup had not run: older generations keep recording
	}
	return nil, nil
}

func (s *memSession) OpenDisk(_ context.Context, key string) (hypervisor.DiskReader, error) {
	for i, d := range s.disks {
		if d.Key == key {
			return &memReader{data: s.frozen[key], changed: s.changed[i], fail: s.c.failOn == key}, nil
		}
	}
	return nil, hypervisor.ErrNotFound
}

type memReader struct {
	data    []byte
	changed map[int64]bool
	fail    bool
	read    atomic.Int64 // ReadAt is called concurrently
}

func (r *memReader) ReadAt(p []byte, off int64) (int, error) {
	if r.fail {
		return 0, errors.New("injected read failure")
	}
	r.read.Add(int64(len(p)))
	return copy(p, r.data[off:]), nil
}
func (r *memReader) Size() int64 { return int64(len(r.data)) }
func (r *memReader) Allocated(context.Context) ([]hypervisor.Extent, error) {
	return nil, nil
}
func (r *memReader) Changed(context.Context) ([]hypervisor.Extent, bool, error) {
	if r.changed == nil {
		return nil, false, nil
	}
	var out []hypervisor.Extent
	for b := range r.changed {
		out = append(out, hypervisor.Extent{Offset: b * block, Length: block})
	}
	return out, true, nil
}
func (r *memReader) Close() error { return nil }

func backupVM(t *testing.T, r *repo.Repository, c *memConnector, mode string) (*repo.Point, error) {
	t.Helper()
	return backuptest.BackupVM(t, r, c, backup.VMRequest{Connection: "lab", VM: hypervisor.VMRef{ID: "vm-1", Name: "one"}, Mode: mode,
		SnapshotMode: hypervisor.CrashConsistent})
}

func checkPoint(t *testing.T, r *repo.Repository, s *repo.Point, want map[string][]byte) {
	t.Helper()
	for _, d := range s.Disks {
		out := filepath.Join(t.TempDir(), d.Key)
		if _, err := restore.ToFile(context.Background(), r, s, d, out, restore.FileOptions{}); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(out)
		if !bytes.Equal(got, want[d.Key]) {
			t.Fatalf("point %s (%s) disk %s differs from the disk at its instant", s.ID.Short(), s.Mode, d.Key)
		}
	}
}

func copyDisks(c *memConnector) map[string][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][]byte{}
	for k, d := range c.disks {
		out[k] = append([]byte(nil), d...)
	}
	return out
}

func TestVMIncrementalDifferentialAndFailure(t *testing.T) {
	r := newRepo(t, repo.InitOptions{})
	c := newMem(map[string]int{"vda": 8 << 20, "vdb": 3<<20 + 4096})
	rnd := make([]byte, 300<<10)
	scribble := func() {
		_, _ = rand.Read(rnd)
		c.write("vda", 5<<20+7, rnd)
		c.write("vdb", 1<<20, rnd[:4096])
	}
	scribble()
	full, err := backupVM(t, r, c, "")
	if err != nil || full.Mode != "full" {
		t.Fatalf("first backup: %v mode %v", err, full)
	}
	atFull := copyDisks(c)
	checkPoint(t, r, full, atFull)
	scribble()
	inc, err := backupVM(t, r, c, "incremental")
	if err != nil || inc.Mode != "incremental" {
		t.Fatalf("incremental: %v", err)
	}
	checked := 0 // unchanged spans read to check change tracking
	for _, d := range inc.Disks {
		checked += d.ChangeCheckSpans
	}
	if inc.BytesRead > 3<<20+int64(checked*r.Config().ChunkSize) {
		t.Fatalf("incremental read %d bytes: unchanged spans were read", inc.BytesRead)
	}
	checkPoint(t, r, inc, copyDisks(c))
	// Nothing written since: change tracking reports no range (nil, as
	// QEMU's dirty bitmap or a storage snapshot's change set can), and
	// the incremental reads only the spans it checks.
	idle, err := backupVM(t, r, c, "incremental")
	if err != nil || idle.Mode != "incremental" {
		t.Fatalf("idle incremental: %v %+v", err, idle)
	}
	checked = 0
	for _, d := range idle.Disks {
		checked += d.ChangeCheckSpans
	}
	if idle.BytesRead > int64(checked*r.Config().ChunkSize) {
		t.Fatalf("idle incremental read %d bytes, more than the %d spans it checked", idle.BytesRead, checked)
	}
	checkPoint(t, r, idle, copyDisks(c))
	// A failing backup rolls tracking back: the next incremental still
	// covers the writes made before the failure.
	scribble()
	c.failOn = "vdb"
	if _, err := backupVM(t, r, c, "incremental"); err == nil {
		t.Fatal("backup with a failing disk succeeded")
	}
	if got := c.closed[len(c.closed)-1]; got {
		t.Fatal("session of a failed backup closed with ok=true")
	}
	c.failOn = ""
	scribble()
	inc2, err := backupVM(t, r, c, "incremental")
	if err != nil {
		t.Fatal(err)
	}
	checkPoint(t, r, inc2, copyDisks(c))
	scribble()
	diff, err := backupVM(t, r, c, "differential")
	if err != nil || diff.Mode != "differential" || diff.BaseFull != full.ID.String() {
		t.Fatalf("differential: %v %+v", err, diff)
	}
	checkPoint(t, r, diff, copyDisks(c))
	// The first point still restores to the disks at its own instant.
	checkPoint(t, r, full, atFull)
}

// The point records the mode the session reports having achieved next to
// the one requested: the pipeline never copies the request into both.
func TestVMPointRecordsAchievedMode(t *testing.T) {
	r := newRepo(t, repo.InitOptions{})
	c := newMem(map[string]int{"vda": 1 << 20})
	for _, achieved := range []hypervisor.SnapshotMode{hypervisor.CrashConsistent, hypervisor.Quiesced} {
		c.achieved = achieved
		s, err := backuptest.BackupVM(t, r, c, backup.VMRequest{Connection: "lab", VM: hypervisor.VMRef{ID: "vm-1", Name: "one"},
			SnapshotMode: hypervisor.Quiesced, Quiesce: hypervisor.QuiesceFallback})
		if err != nil {
			t.Fatal(err)
		}
		stored, err := r.LoadPoint(context.Background(), s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if stored.SnapshotMode != "quiesced" || stored.SnapshotModeAchieved != string(achieved) {
			t.Fatalf("session achieved %s: manifest records requested %q, achieved %q", achieved, stored.SnapshotMode, stored.SnapshotModeAchieved)
		}
	}
}
