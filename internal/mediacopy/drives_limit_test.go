package mediacopy_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/backup/backuptest"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/media"
	"github.com/coffer-backup/coffer/internal/mediacopy"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
)

// slotWatch counts the drives holding a slot of the engine's limiter,
// and holds each drive's first write until parallel drives hold one at
// once, so that the drives that may overlap do (without it one drive
// could finish before the next started, and a limit that let every drive
// in would go unseen).
type slotWatch struct {
	t        *testing.T
	limiter  *engine.Limiter
	need     engine.SlotNeed
	parallel int

	mu      sync.Mutex
	holding map[int]bool
	most    int
	reached chan struct{}
	once    sync.Once
}

func (w *slotWatch) slot(ctx context.Context, drive int, bytes int64) (func(), error) {
	release, err := w.limiter.Acquire(ctx, bytes, nil, w.need)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.holding[drive] = true
	w.most = max(w.most, len(w.holding))
	if len(w.holding) == w.parallel {
		w.once.Do(func() { close(w.reached) })
	}
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		delete(w.holding, drive)
		w.mu.Unlock()
		release()
	}, nil
}

// watchedDrive fails the test when its drive writes without a slot.
type watchedDrive struct {
	media.Drive
	w       *slotWatch
	index   int
	started bool
}

func (d *watchedDrive) WriteRecord(p []byte) (int, error) {
	if !d.started {
		d.started = true
		select {
		case <-d.w.reached:
		case <-time.After(time.Minute): // a failure's guard, not a wait for an event
			d.w.t.Errorf("drive %d: %d drives never held a slot at once", d.index, d.w.parallel)
		}
	}
	d.w.mu.Lock()
	held := d.w.holding[d.index]
	d.w.mu.Unlock()
	if !held {
		d.w.t.Errorf("drive %d writes without a slot of the engine's limits", d.index)
	}
	return d.Drive.WriteRecord(p)
}

// TestDrivesWithinTheEngineLimits: a copy through 3 drives takes a slot
// of the engine's limiter for each drive's session. With a library pool
// of 2, at most 2 drives write at once and the third writes after one of
// them; with 3 (every drive, the default), all 3 at once. Either way
// every point is copied and every volume reads back matching its index.
func TestDrivesWithinTheEngineLimits(t *testing.T) {
	ctx := context.Background()
	src := repotest.New(t, repo.InitOptions{ChunkSize: 64 << 10})
	var snaps []*repo.Point
	for i, size := range []int{600 << 10, 500 << 10, 400 << 10} {
		path, _ := image(t, uint64(30+i), size)
		snaps = append(snaps, backuptest.BackupImage(t, src, path, backup.Options{}))
	}
	for _, limit := range []int{2, 3} {
		t.Run(fmt.Sprintf("limit %d of 3 drives", limit), func(t *testing.T) {
			w := &slotWatch{t: t, limiter: engine.NewLimiter(16), need: engine.SlotNeed{Key: "library:vtl", Cap: limit}, parallel: limit,
				holding: map[int]bool{}, reached: make(chan struct{})}
			libs := drives(t, 3, 6, 4<<20)
			for _, l := range libs {
				l.Drive = &watchedDrive{Drive: l.Drive, w: w, index: l.DriveIndex}
			}
			results, err := mediacopy.CopyOnDrives(ctx, src, snaps, libs, mediacopy.CopyOptions{Pool: "offsite", BlockSize: 32 << 10, DriveSlot: w.slot})
			if err != nil {
				t.Fatal(err)
			}
			if w.most != limit {
				t.Fatalf("%d drives wrote at once, want %d (the limit)", w.most, limit)
			}
			for d, res := range results {
				if res == nil || len(res.Volumes) == 0 {
					t.Fatalf("drive %d: %+v", d, res)
				}
				for _, ix := range res.Volumes {
					v, err := libs[0].Mount(ctx, ix.Label.Barcode)
					if err != nil {
						t.Fatal(err)
					}
					rep, err := v.Scan()
					if err != nil || !rep.IndexMatches || len(rep.Bad) > 0 {
						t.Fatalf("volume %s of drive %d: %+v %v", ix.Label.Barcode, d, rep, err)
					}
				}
			}
			for _, s := range w.limiter.Slots() {
				if s.InUse != 0 {
					t.Fatalf("pool %s: %d slot(s) still held after the copy", s.Key, s.InUse)
				}
			}
		})
	}
}
