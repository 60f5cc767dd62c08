package volume_test

import (
	"context"
	"errors"
	"testing"

	"github.com/coffer-backup/coffer/internal/media/format"
	"github.com/coffer-backup/coffer/internal/media/volume"
	"github.com/coffer-backup/coffer/internal/media/vtl"
)

// A crash tearing any record of a blank cartridge's first copy (the label,
// the first index, the session's labels, data or its index) leaves a
// cartridge the pool takes again: the next copy writes on it, reads back,
// and a scan finds exactly what the index lists, nothing damaged.
func TestCrashAtEveryRecordOfTheFirstCopy(t *testing.T) {
	payload := data(11, 60000)
	for whole := 0; ; whole++ {
		e := newEnv(t, 1, 16<<20)
		e.lib.Faults().TornWriteAfter(whole)
		_, err := firstCopy(e, payload)
		if err == nil {
			if whole < 4 {
				t.Fatalf("a copy of a few records survived a tear after %d records", whole)
			}
			return // the tear came after the copy's last record
		}
		if !errors.Is(err, vtl.ErrCrashed) {
			t.Fatalf("torn after %d whole records: %v", whole, err)
		}
		e.reopen()
		again := data(12, 50000)
		res, err := firstCopy(e, again)
		if err != nil {
			t.Fatalf("the copy after a tear after %d whole records: %v", whole, err)
		}
		e.readBack(res, "pointa", again, volume.ReadOptions{})
		m, err := e.vl.Mount(context.Background(), code(1))
		if err != nil {
			t.Fatal(err)
		}
		rep, err := m.Scan()
		if err != nil {
			t.Fatal(err)
		}
		if !rep.IndexMatches || len(rep.Bad) != 0 || len(m.Index.Segments) != 1 {
			t.Fatalf("scan after a tear after %d whole records: %+v", whole, rep)
		}
	}
}

// firstCopy writes one point to the pool's first writable volume.
func firstCopy(e *env, payload []byte) ([]format.VolumeIndex, error) {
	p := e.pool()
	v, err := p.First(context.Background())
	if err != nil {
		return nil, err
	}
	res, err := volume.WriteSession(context.Background(), v, p, sources([][]byte{payload}), volume.WriteOptions{})
	if err != nil {
		return nil, err
	}
	return res.Volumes, nil
}

// A session ending at every block around the early-warning point (its
// last data block, its end label, its index or the next session's start
// label the first write in the zone) leaves volumes that read back and
// scan as their indexes say, and the next session goes on, on the same
// volume or the next.
func TestSessionsEndingAroundTheEarlyWarning(t *testing.T) {
	const capacity = 512 << 10 // the zone is its last 128 KiB: 24 blocks in
	per := format.Payload(blockSize)
	for blocks := 14; blocks <= 24; blocks++ {
		e := newEnv(t, 3, capacity)
		first, second := data(uint64(blocks), blocks*per), data(99, 3*per)
		a, err := firstCopy(e, first)
		if err != nil {
			t.Fatalf("a session of %d blocks: %v", blocks, err)
		}
		p := e.pool()
		v, err := p.First(context.Background())
		if err != nil {
			t.Fatalf("after a session of %d blocks: %v", blocks, err)
		}
		res, err := volume.WriteSession(context.Background(), v, p, named("again", [][]byte{second}), volume.WriteOptions{})
		if err != nil {
			t.Fatalf("the session after one of %d blocks: %v", blocks, err)
		}
		e.readBack(a, "pointa", first, volume.ReadOptions{})
		e.readBack(res.Volumes, "againa", second, volume.ReadOptions{})
		for i := 1; i <= 3; i++ {
			m, err := e.vl.Mount(context.Background(), code(i))
			if errors.Is(err, volume.ErrBlank) {
				continue
			}
			if err != nil {
				t.Fatalf("after %d blocks: %s: %v", blocks, code(i), err)
			}
			rep, err := m.Scan()
			if err != nil || !rep.IndexMatches || len(rep.Bad) != 0 || rep.Unindexed != 0 {
				t.Fatalf("after %d blocks: scan of %s: %+v %v", blocks, code(i), rep, err)
			}
		}
	}
}
