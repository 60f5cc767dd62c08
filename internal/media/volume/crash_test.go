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
