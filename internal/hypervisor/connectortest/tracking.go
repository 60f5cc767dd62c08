package connectortest

import (
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// changeTracking: the change set after a write holds the written range;
// a failed backup (Close(false)) leaves tracking where it was, so the next
// attempt still sees the write; an idle disk's change set is empty.
func (c *checker) changeTracking(t *testing.T) {
	if !c.h.Caps.ChangeTracking {
		t.Skip("the harness declares no change tracking")
	}
	tokens := c.trackedFull(t)
	off, data := c.offset(5), pattern(5)
	c.write(t, off, data)
	for _, attempt := range []string{"failed", "retried"} {
		req := c.request(hypervisor.CrashConsistent)
		req.Track, req.Since = true, tokens
		s := c.snapshot(t, req)
		if d := c.sessionDisk(t, s); d.Changes != "incremental" {
			t.Fatalf("%s backup: disk %s changes %q, want incremental", attempt, d.Key, d.Changes)
		}
		changed := c.changed(t, s)
		if !covers(changed, off, int64(len(data))) {
			t.Fatalf("%s backup: changed %+v leaves out the range written at %d", attempt, changed, off)
		}
		if attempt == "failed" {
			if _, err := s.Close(c.ctx, false); err != nil {
				t.Fatalf("close(failed): %v", err)
			}
			continue
		}
		tokens = c.closeOK(t, s)
	}
	if !c.h.Caps.QuietChanges {
		return
	}
	req := c.request(hypervisor.CrashConsistent)
	req.Track, req.Since = true, tokens
	s := c.snapshot(t, req)
	if changed := c.changed(t, s); len(changed) > 0 {
		t.Fatalf("nothing was written since the last backup, changed %+v", changed)
	}
	c.closeOK(t, s)
}

// changed is the change set of the suite's disk in s, which must have one.
func (c *checker) changed(t *testing.T, s hypervisor.Session) []hypervisor.Extent {
	t.Helper()
	d := c.sessionDisk(t, s)
	if (d.Changes != "incremental" && d.Changes != "differential") || d.ChangeWarning != "" {
		t.Fatalf("disk %s: changes %q (%s) with a valid token, want a change set", d.Key, d.Changes, d.ChangeWarning)
	}
	r := c.open(t, c.ctx, s)
	changed, ok, err := r.Changed(c.ctx)
	if err != nil || !ok {
		t.Fatalf("changed: %v, valid %v", err, ok)
	}
	checkExtents(t, "changed", changed, r.Size())
	if err := r.Close(); err != nil {
		t.Fatalf("closing the reader: %v", err)
	}
	return changed
}

// unusableToken: a token the connector did not issue reads the disk in
// full and says why, never an empty change set.
func (c *checker) unusableToken(t *testing.T) {
	if !c.h.Caps.ChangeTracking {
		t.Skip("the harness declares no change tracking")
	}
	req := c.request(hypervisor.CrashConsistent)
	req.Since = map[string]string{c.disk.Key: "coffer-conformance-never-issued@1"}
	s := c.snapshot(t, req)
	d := c.sessionDisk(t, s)
	if (d.Changes != "full" && d.Changes != "") || d.ChangeWarning == "" {
		t.Fatalf("a token never issued: changes %q, warning %q; want a full read and why", d.Changes, d.ChangeWarning)
	}
	r := c.open(t, c.ctx, s)
	if ext, ok, err := r.Changed(c.ctx); ok || err != nil {
		t.Fatalf("a token never issued: changed %+v, valid %v, %v", ext, ok, err)
	}
}

// trackedFull takes a tracked full backup and returns its change tokens.
func (c *checker) trackedFull(t *testing.T) map[string]string {
	t.Helper()
	req := c.request(hypervisor.CrashConsistent)
	req.Track = true
	tokens := c.closeOK(t, c.snapshot(t, req))
	if tokens[c.disk.Key] == "" {
		t.Fatalf("a tracked full backup gave no change token for disk %s: %v", c.disk.Key, tokens)
	}
	return tokens
}

// differential: a differential backup diffs against the full and leaves
// the base where it is, so the next differential holds the writes before
// the first one as well as those after.
func (c *checker) differential(t *testing.T) {
	if !c.h.Caps.ChangeTracking {
		t.Skip("the harness declares no change tracking")
	}
	full := c.trackedFull(t)
	var written []int64
	for i, n := range []int{6, 7} {
		off := c.offset(n)
		c.write(t, off, pattern(10+n))
		written = append(written, off)
		req := c.request(hypervisor.CrashConsistent)
		req.Track, req.Since, req.Differential = true, full, true
		s := c.snapshot(t, req)
		if d := c.sessionDisk(t, s); d.Changes != "differential" {
			t.Fatalf("differential %d: disk %s changes %q (%s)", i+1, d.Key, d.Changes, d.ChangeWarning)
		}
		changed := c.changed(t, s)
		for _, w := range written {
			if !covers(changed, w, 64<<10) {
				t.Fatalf("differential %d: changed %+v leaves out the range written at %d since the full", i+1, changed, w)
			}
		}
		c.closeOK(t, s)
	}
}

// release: a session for storage-level protection (Hold) released early,
// as the engine's group mode does once the storage snapshot is taken,
// still opens its disks for their change sets (the data then comes from
// the storage snapshot), and closes with change tokens.
func (c *checker) release(t *testing.T) {
	if !c.h.Caps.ChangeTracking || !c.h.Caps.Release {
		t.Skip("the harness declares no change tracking or no early release")
	}
	tokens := c.trackedFull(t)
	off := c.offset(4)
	c.write(t, off, pattern(40))
	req := c.request(hypervisor.CrashConsistent)
	req.Track, req.Since, req.Hold = true, tokens, true
	s := c.snapshot(t, req)
	if err := s.Release(c.ctx); err != nil {
		t.Fatalf("release: %v", err)
	}
	if changed := c.changed(t, s); !covers(changed, off, 64<<10) {
		t.Fatalf("after release: changed %+v leaves out the range written at %d", changed, off)
	}
	if next := c.closeOK(t, s); next[c.disk.Key] == "" {
		t.Fatalf("a released session closed without a change token for %s: %v", c.disk.Key, next)
	}
}
