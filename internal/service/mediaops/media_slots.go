package mediaops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/media/volume"
	"github.com/coffer-backup/coffer/internal/media/vtl"
)

// driveSlots is the pool of a library's drives: "library:NAME", as many
// slots as its drive-limit, else as its drives (each drive of a copy
// then waits only for limits.tasks).
func (l mediaLibrary) driveSlots(lib *volume.Library) (engine.SlotNeed, error) {
	n := l.DriveLimit
	if n == 0 {
		var err error
		if n, err = l.driveCount(lib); err != nil {
			return engine.SlotNeed{}, err
		}
	}
	return engine.SlotNeed{Key: "library:" + l.Ref(), Cap: n}, nil
}

// driveCount is how many drives the library has: a real one's of the
// configuration, a virtual one's as it was made.
func (l mediaLibrary) driveCount(lib *volume.Library) (int, error) {
	if v, ok := lib.Changer.(*vtl.Library); ok {
		return v.Config().Drives, nil
	}
	if len(l.Devices) == 0 {
		return 0, fmt.Errorf("media library %s: no drive", l.Ref())
	}
	return len(l.Devices), nil
}

// copySlots hands a copy's drives their slots (mediacopy.CopyOptions.
// DriveSlot): one of the library's pool and one of limits.tasks each,
// said in the task's log when a drive has to wait; it counts the most
// drives that held one at once, which the copy reports.
type copySlots struct {
	limiter *engine.Limiter
	need    engine.SlotNeed
	t       service.Job
	library string

	mu            sync.Mutex
	holding, most int
}

func (c *copySlots) acquire(ctx context.Context, drive int, bytes int64) (func(), error) {
	waiting := func() {
		c.t.Log(slog.LevelInfo, fmt.Sprintf("drive %d of library %s waits for a slot: %d drive(s) write at once "+
			"(the library's drive-limit, else its drives), within limits.tasks", drive, c.library, c.need.Cap))
	}
	release, err := c.limiter.Acquire(ctx, bytes, waiting, c.need)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.holding++
	c.most = max(c.most, c.holding)
	c.mu.Unlock()
	var once sync.Once // a drive may give its slot back on several paths
	return func() {
		once.Do(func() {
			c.mu.Lock()
			c.holding--
			c.mu.Unlock()
			release()
		})
	}, nil
}

// mostAtOnce is the most drives that held a slot at once so far.
func (c *copySlots) mostAtOnce() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.most
}
