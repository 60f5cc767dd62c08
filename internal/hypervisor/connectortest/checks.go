package connectortest

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// inventory: the VM is listed with what the engine plans with: a stable
// ID, disks with unique keys and their sizes.
func (c *checker) inventory(t *testing.T) {
	if c.h.Conn.Kind() == "" {
		t.Fatal("Kind is empty: backup points record it as their source's kind")
	}
	if c.vm.ID == "" || c.vm.Busy {
		t.Fatalf("VM listed without an ID or busy with no session open: %+v", c.vm)
	}
	keys := map[string]bool{}
	for _, d := range c.vm.Disks {
		if d.Key == "" || keys[d.Key] || d.Size <= 0 {
			t.Fatalf("disk without a key, with a key listed twice or without a size: %+v", c.vm.Disks)
		}
		keys[d.Key] = true
	}
	again := c.describeAgain(t)
	if again.ID != c.vm.ID || len(again.Disks) != len(c.vm.Disks) {
		t.Fatalf("a second inventory describes the VM differently: %+v, then %+v", c.vm, again)
	}
}

func (c *checker) describeAgain(t *testing.T) hypervisor.VM {
	t.Helper()
	vm, _ := c.describe(t)
	return vm
}

// unknownVM: a VM that does not exist is ErrNotFound, which the engine
// does not retry and the inventory's refresher reads as "deleted".
func (c *checker) unknownVM(t *testing.T) {
	missing := hypervisor.VMRef{ID: "coffer-conformance-missing", Name: "coffer-conformance-missing"}
	s, err := c.h.Conn.Snapshot(c.ctx, missing, c.request(hypervisor.CrashConsistent))
	if err == nil {
		_, _ = s.Close(context.Background(), false) // the check failed already: its error is the one to report
		t.Fatal("a snapshot of a VM that does not exist succeeded")
	}
	if !isErr(err, hypervisor.ErrNotFound) {
		t.Fatalf("a snapshot of a VM that does not exist failed with %v, not hypervisor.ErrNotFound", err)
	}
}

// modes: every declared mode gives a session that reports the mode it
// achieved (the backup point records it), says why in Warnings when that
// is weaker than asked, and lists the VM's disks.
func (c *checker) modes(t *testing.T) {
	if len(c.h.Caps.Modes) == 0 {
		t.Fatal("the harness declares no snapshot mode")
	}
	for _, mode := range sortedModes(c.h.Caps.Modes) {
		name := string(mode)
		if name == "" {
			name = "unset" // the engine's default: crash-consistent
		}
		t.Run(name, func(t *testing.T) { c.mode(t, mode, c.h.Caps.Modes[mode]) })
	}
	if c.h.Caps.Modes[hypervisor.Quiesced] == hypervisor.CrashConsistent {
		t.Run("quiesce-required", func(t *testing.T) {
			req := c.request(hypervisor.Quiesced)
			req.Quiesce = hypervisor.QuiesceRequired
			s, err := c.h.Conn.Snapshot(c.ctx, c.vm.VMRef, req)
			if err == nil {
				_, _ = s.Close(context.Background(), false) // the check failed already: its error is the one to report
				t.Fatal("a required quiesce that cannot happen gave a session")
			}
			if !isErr(err, hypervisor.ErrQuiesceFailed) {
				t.Fatalf("a required quiesce that cannot happen failed with %v, not ErrQuiesceFailed", err)
			}
		})
	}
	for mode, want := range c.h.Caps.Refused {
		t.Run("refused-"+string(mode), func(t *testing.T) {
			s, err := c.h.Conn.Snapshot(c.ctx, c.vm.VMRef, c.request(mode))
			if err == nil {
				_, _ = s.Close(context.Background(), false) // the check failed already: its error is the one to report
				t.Fatalf("mode %s declared refused gave a session", mode)
			}
			if !isErr(err, want) {
				t.Fatalf("mode %s failed with %v, want %v", mode, err, want)
			}
		})
	}
}

func (c *checker) mode(t *testing.T, mode, want hypervisor.SnapshotMode) {
	s := c.snapshot(t, c.request(mode))
	got := s.AchievedMode()
	asked := mode
	if asked == "" {
		asked = hypervisor.CrashConsistent
	}
	switch {
	case got != want:
		t.Fatalf("asked %q, achieved %q; on this VM it achieves %q", mode, got, want)
	case got != asked && got != hypervisor.CrashConsistent:
		t.Fatalf("asked %q, achieved %q: a mode falls back to crash-consistent, never to another", mode, got)
	case got != asked && len(s.Warnings()) == 0:
		t.Fatalf("asked %q, achieved %q without a warning saying why", mode, got)
	}
	memory := 0
	byKey := map[string]hypervisor.DiskSnapshot{}
	for _, d := range s.Disks() {
		switch d.Kind {
		case hypervisor.KindMemory:
			memory++
		case hypervisor.KindDisk:
			byKey[d.Key] = d
		default:
			t.Fatalf("session disk %s of kind %q", d.Key, d.Kind)
		}
	}
	if (memory > 0) != (got == hypervisor.WithMemory) {
		t.Fatalf("achieved %s with %d memory streams", got, memory)
	}
	cfg := map[string]bool{}
	for _, d := range s.Config().Disks {
		cfg[d.Key] = true
	}
	for _, d := range c.vm.Disks {
		sd, ok := byKey[d.Key]
		if !ok || sd.Size != d.Size {
			t.Fatalf("inventory disk %s (%d bytes) is not in the session as such: %+v", d.Key, d.Size, s.Disks())
		}
		if !cfg[d.Key] {
			t.Fatalf("disk %s is not in the session's recorded configuration, which restore recreates: %+v", d.Key, s.Config().Disks)
		}
	}
	if _, err := s.Close(c.ctx, false); err != nil {
		t.Fatalf("close(failed): %v", err)
	}
	if _, err := s.Close(c.ctx, false); err != nil {
		t.Fatalf("a second close (Close is idempotent): %v", err)
	}
}

func sortedModes(m map[hypervisor.SnapshotMode]hypervisor.SnapshotMode) []hypervisor.SnapshotMode {
	var out []hypervisor.SnapshotMode
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// read: the session reads what was written before it, the reader's size
// is the disk's, and the allocation map, which the pipeline never reads
// outside of, covers the written range.
func (c *checker) read(t *testing.T) {
	off, data := c.offset(2), pattern(2)
	c.write(t, off, data)
	s := c.snapshot(t, c.request(hypervisor.CrashConsistent))
	r := c.open(t, c.ctx, s)
	if r.Size() != c.disk.Size {
		t.Fatalf("reader size %d, inventory size %d", r.Size(), c.disk.Size)
	}
	if got := readRange(t, r, off, len(data)); !bytes.Equal(got, data) {
		t.Fatalf("read at %d differs from what was written there", off)
	}
	alloc, err := r.Allocated(c.ctx)
	if err != nil {
		t.Fatalf("allocated: %v", err)
	}
	checkExtents(t, "allocated", alloc, r.Size())
	if !covers(alloc, off, int64(len(data))) {
		t.Fatalf("allocated %+v leaves out the written range at %d: backups would lose it", alloc, off)
	}
	zerosOutside(t, r, alloc)
	c.readConcurrently(t, s, r, off, data)
	if _, err := s.OpenDisk(c.ctx, "coffer-conformance-no-disk"); !isErr(err, hypervisor.ErrNotFound) {
		t.Fatalf("opening a disk the session does not have: %v, want ErrNotFound", err)
	}
}

// zerosOutside checks that the disk reads as zeros outside its
// allocation map: the pipeline stores those ranges as holes unread.
func zerosOutside(t *testing.T, r hypervisor.DiskReader, alloc []hypervisor.Extent) {
	t.Helper()
	var at int64
	for _, gap := range append(alloc, hypervisor.Extent{Offset: r.Size()}) {
		for at < gap.Offset {
			n := min(gap.Offset-at, 1<<20)
			if b := readRange(t, r, at, int(n)); !bytes.Equal(b, make([]byte, n)) {
				t.Fatalf("bytes at %d..%d, outside the allocation map, are not zeros", at, at+n)
			}
			at += n
		}
		at = gap.Offset + gap.Length
	}
}

// readConcurrently reads one range through r and a second reader of the
// same disk from several goroutines at once, as the pipeline's readers do.
func (c *checker) readConcurrently(t *testing.T, s hypervisor.Session, r hypervisor.DiskReader, off int64, data []byte) {
	t.Helper()
	readers := []hypervisor.DiskReader{r, c.open(t, c.ctx, s)}
	const piece = 4 << 10
	errs := make(chan error, len(data)/piece)
	var wg sync.WaitGroup
	for i := 0; i < len(data); i += piece {
		wg.Go(func() {
			buf := make([]byte, piece)
			if _, err := readers[i/piece%2].ReadAt(buf, off+int64(i)); err != nil {
				errs <- err
			} else if !bytes.Equal(buf, data[i:i+piece]) {
				errs <- fmt.Errorf("concurrent read at %d differs from what was written", off+int64(i))
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// pointInTime: a write after the snapshot does not reach its reads.
func (c *checker) pointInTime(t *testing.T) {
	if !c.h.Caps.PointInTime {
		t.Skip("the harness declares snapshots that do not hold their instant's data")
	}
	off, before, after := c.offset(3), pattern(3), pattern(4)
	c.write(t, off, before)
	s := c.snapshot(t, c.request(hypervisor.CrashConsistent))
	c.write(t, off, after)
	r := c.open(t, c.ctx, s)
	if got := readRange(t, r, off, len(before)); !bytes.Equal(got, before) {
		if bytes.Equal(got, after) {
			t.Fatal("the session reads a write made after its snapshot")
		}
		t.Fatal("the session reads neither the data before its snapshot nor after")
	}
}

// cancelEndsRead: once the context a disk was opened with is cancelled
// (the job was cancelled or timed out), its reads end with the context's
// error instead of going on.
func (c *checker) cancelEndsRead(t *testing.T) {
	s := c.snapshot(t, c.request(hypervisor.CrashConsistent))
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	r := c.open(t, ctx, s)
	readRange(t, r, 0, 64<<10)
	cancel()
	buf := make([]byte, min(r.Size(), 4<<20))
	if _, err := r.ReadAt(buf, 0); !isErr(err, context.Canceled) {
		t.Fatalf("a read after its context was cancelled: %v, want context.Canceled", err)
	}
	if _, err := r.Allocated(ctx); err == nil {
		t.Fatal("the allocation map with a cancelled context succeeded")
	}
}

// cancelledSnapshot: a snapshot asked with a cancelled context fails and
// leaves nothing behind.
func (c *checker) cancelledSnapshot(t *testing.T) {
	ctx, cancel := context.WithCancel(c.ctx)
	cancel()
	s, err := c.h.Conn.Snapshot(ctx, c.vm.VMRef, c.request(hypervisor.CrashConsistent))
	if err == nil {
		_, _ = s.Close(context.Background(), false) // the check failed already: its error is the one to report
		t.Fatal("a snapshot with a cancelled context succeeded")
	}
}

// cleanupFindsNothing: sessions that were closed leave nothing for
// CleanupLeftovers, which reports only what crashed processes left.
func (c *checker) cleanupFindsNothing(t *testing.T) {
	left, err := c.h.Conn.CleanupLeftovers(c.ctx)
	if err != nil {
		t.Fatalf("cleanup: %v", err)
	}
	if len(left) > 0 {
		t.Fatalf("cleanup found leftovers of sessions that were all closed: %+v", left)
	}
}
