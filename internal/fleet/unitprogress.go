package fleet

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/catalog"
)

// RunningTasks lists a job's tasks in a state (UnitProgress reads the
// running ones).
type RunningTasks interface {
	ListTasks(ctx context.Context, f catalog.TaskFilter) ([]catalog.Task, error)
}

// UnitProgress is the leader's view of how far its units on the workers
// got, for its job's progress (engine.Job.Progress), which counts a
// running attempt by its backup.Progress: the local attempt feeds that
// itself, and a unit on a worker is fed from its task's row, which the
// worker updates every progressEvery (unitPace.report). One read of a
// job's running tasks per progressEvery, only while a unit of that job
// has been in flight that long: a run of units shorter than that costs
// the catalog nothing more, as on the worker. The nil *UnitProgress
// reads nothing (the job's progress counts a unit when it ends).
type UnitProgress struct {
	Tasks RunningTasks
	Log   *slog.Logger
	// Every is how often the rows are read (0: progressEvery).
	Every time.Duration

	mu      sync.Mutex
	units   map[int64]watchedUnit // by task ID
	reading bool                  // the loop runs
}

type watchedUnit struct {
	job   int64
	since time.Time
	prog  *backup.Progress
}

// NewUnitProgress reads the units' progress from tasks.
func NewUnitProgress(tasks RunningTasks, log *slog.Logger) *UnitProgress {
	return &UnitProgress{Tasks: tasks, Log: log}
}

// watch feeds prog from task's row (of job) until the returned function
// is called.
func (u *UnitProgress) watch(job, task int64, prog *backup.Progress) (stop func()) {
	if u == nil || prog == nil {
		return func() {}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.units == nil {
		u.units = map[int64]watchedUnit{}
	}
	u.units[task] = watchedUnit{job: job, since: time.Now(), prog: prog}
	if !u.reading {
		u.reading = true
		go u.read()
	}
	return func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		if w, ok := u.units[task]; ok && w.prog == prog {
			delete(u.units, task)
		}
	}
}

func (u *UnitProgress) every() time.Duration {
	if u.Every > 0 {
		return u.Every
	}
	return progressEvery
}

// read reads, every interval, the rows of the jobs with a unit watched
// for an interval at least, until no unit is watched.
func (u *UnitProgress) read() {
	t := time.NewTicker(u.every())
	defer t.Stop()
	for range t.C {
		jobs, more := u.due()
		if !more {
			return
		}
		for _, job := range jobs {
			u.readJob(job)
		}
	}
}

// due are the jobs whose units are due a read; more is false, and the
// loop ends, once no unit is watched.
func (u *UnitProgress) due() (jobs []int64, more bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.units) == 0 {
		u.reading = false
		return nil, false
	}
	seen := map[int64]bool{}
	for _, w := range u.units {
		if !seen[w.job] && time.Since(w.since) >= u.every() {
			seen[w.job] = true
			jobs = append(jobs, w.job)
		}
	}
	return jobs, true
}

func (u *UnitProgress) readJob(job int64) {
	ctx, cancel := context.WithTimeout(context.Background(), u.every())
	defer cancel()
	tasks, err := u.Tasks.ListTasks(ctx, catalog.TaskFilter{JobID: job, Status: catalog.StatusRunning})
	if err != nil {
		if u.Log != nil {
			u.Log.Warn("cannot read the progress of a job's units on the workers", "job", job, "err", err)
		}
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, t := range tasks {
		w, ok := u.units[t.ID]
		if !ok || w.job != job {
			continue
		}
		// Never backwards: the engine's own record of the running task
		// (its recorder's flush, with no bytes until the end) may land
		// after a sample and blank the row until the next one.
		if t.BytesLogical > w.prog.BytesDone.Load() {
			w.prog.BytesDone.Store(t.BytesLogical)
			w.prog.BytesRead.Store(t.BytesRead)
			w.prog.BytesStored.Store(t.BytesStored)
		}
	}
}
