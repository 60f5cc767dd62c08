package fleetops

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/maintenance"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/schedule"
	"github.com/coffer-backup/coffer/internal/taskstarted"
)

// A copy after a policy's run (a maintenance copy or media-copy with
// after: POLICY) is recorded in the catalog from the run's start: the
// engine of every server writes, as the first lines of each run of the
// policy, one copy-after line per such job. The schedules' lease holder
// looks for runs that ended with such a line and no copy-after-started
// line for it, and starts the copy of the points the run made as a job
// of its own; both jobs' logs name each other. So a copy pending when
// the server stops (between the run's end and the copy's start) is
// started by the next lease holder, and a copy is never started twice
// by two servers (one holds the lease). A server that dies after the
// copy's job began but before the run's log says so starts it again;
// the copy skips the points already copied.

const (
	// eventCopyAfter, on a backup run, names a job that copies its
	// points once it ends (Fields: copy_after).
	eventCopyAfter = "copy-after"
	// eventCopyAfterStarted, on a backup run, says the copy began as
	// job N (Fields: copy_after, copy_job), or why there is none.
	eventCopyAfterStarted = "copy-after-started"
	// eventCopiesAfter, on the copy, names the run whose points it
	// copies (Fields: copies_after).
	eventCopiesAfter = "copies-after"
)

// copyAfterPoll is how often the lease holder looks for ended runs with
// a copy to start: one listing of the backup jobs newer than the oldest
// still pending.
const copyAfterPoll = 2 * time.Second

// copyAfterLookback bounds how old a run may be and still have its copy
// started, when a server takes the schedules over. A run of a policy
// that no copy follows any more is passed over without reading its log.
const copyAfterLookback = 7 * 24 * time.Hour

// markCopiesAfter makes the engine write, at the start of each run of a
// policy, which jobs of the configuration in effect (plan) copy its
// points after it.
func markCopiesAfter(plan *schedulePlan) func(*engine.Options) {
	return func(o *engine.Options) {
		start := o.StartJob
		if start == nil {
			return // the engine records its jobs itself: runCopiesAfter also finds none of its lines
		}
		o.StartJob = func(ctx context.Context, j catalog.Job) (engine.JobRun, error) {
			run, err := start(ctx, j)
			if err != nil || j.Kind != catalog.KindBackupPolicy {
				return run, err
			}
			for _, a := range plan.afterJobs(j.Policy) {
				run.Record(catalog.Event{JobID: run.Job().ID, Level: "info", Kind: eventCopyAfter,
					Message: fmt.Sprintf("once this run ends, maintenance job %s copies its points (%s)", a.Name, copyTarget(a)),
					Fields:  map[string]any{"copy_after": a.Name}})
			}
			return run, nil
		}
	}
}

func copyTarget(j maintenance.Job) string {
	if j.Kind == "media-copy" {
		return "to pool " + j.Pool + " of media library " + j.Library
	}
	return "to repository " + j.To
}

// copiesAfter starts, while this server holds the schedules' lease, the
// copies of the runs that ended with one pending.
type copiesAfter struct {
	Ops
	cat  catalog.Catalog
	plan *schedulePlan
	// above: runs with a smaller ID are all handled.
	above   int64
	handled map[int64]bool
	running map[string]bool // RUN/JOB of the copies going on
	mu      sync.Mutex
	wg      sync.WaitGroup
}

// runCopiesAfter looks for ended runs every copyAfterPoll until ctx
// ends, then waits for the copies it started.
func (s Ops) runCopiesAfter(ctx context.Context, plan *schedulePlan) {
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		s.Logger().Error("copies after policies' runs cannot be started: the catalog does not open", "err", err)
		return
	}
	defer cat.Close()
	c := &copiesAfter{Ops: s, cat: cat, plan: plan, handled: map[int64]bool{}, running: map[string]bool{}}
	defer c.wg.Wait()
	// The schedules' clock: a test that drives it (COFFER_TEST_CLOCK)
	// decides when the next look happens.
	clock := schedule.ServerClock
	for {
		if err := c.pass(ctx); err != nil && ctx.Err() == nil {
			s.Logger().Warn("looking for runs with a copy to start failed: trying again", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-clock.After(copyAfterPoll):
		}
	}
}

// pass starts the copies of the runs ended since the last pass.
func (c *copiesAfter) pass(ctx context.Context) error {
	jobs, err := c.cat.ListJobs(ctx, catalog.JobFilter{Kind: catalog.KindBackupPolicy, AboveID: c.above,
		Since: time.Now().Add(-copyAfterLookback)})
	if err != nil {
		return err
	}
	lowest := int64(0) // the smallest ID still to look at again
	var errs []error
	for _, j := range jobs {
		if c.handled[j.ID] {
			continue
		}
		if len(c.plan.afterJobs(j.Policy)) == 0 {
			// No copy follows the policy now: a copy its run recorded
			// was dropped from the configuration since.
			c.handled[j.ID] = true
			continue
		}
		done, err := c.run(ctx, j)
		errs = append(errs, err)
		if done {
			c.handled[j.ID] = true
		} else if lowest == 0 || j.ID < lowest {
			lowest = j.ID
		}
	}
	switch {
	case lowest > 0:
		c.above = lowest - 1
	case len(jobs) > 0:
		for _, j := range jobs {
			c.above = max(c.above, j.ID)
		}
	}
	return errors.Join(errs...)
}

// run starts the pending copies of backup run j once it ended, and
// reports whether none is left to start.
func (c *copiesAfter) run(ctx context.Context, j catalog.Job) (bool, error) {
	if j.Status == catalog.StatusRunning || j.Status == catalog.StatusQueued {
		return false, nil
	}
	events, err := c.cat.ListEvents(ctx, catalog.EventFilter{JobID: j.ID})
	if err != nil {
		return false, err
	}
	var pending []string
	started := map[string]bool{}
	for _, ev := range events {
		name, _ := ev.Fields["copy_after"].(string)
		switch ev.Kind {
		case eventCopyAfter:
			pending = append(pending, name)
		case eventCopyAfterStarted:
			started[name] = true
		}
	}
	left := false
	for _, name := range pending {
		if started[name] {
			continue
		}
		left = true
		key := fmt.Sprintf("%d/%s", j.ID, name)
		c.mu.Lock()
		busy := c.running[key]
		c.running[key] = true
		c.mu.Unlock()
		if busy {
			continue
		}
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.copyAfter(ctx, j, name)
			c.mu.Lock()
			delete(c.running, key)
			c.mu.Unlock()
		}()
	}
	return !left, nil
}

// copyAfter copies the points run j made with the maintenance job of
// that name, as the configuration in effect has it now.
func (c *copiesAfter) copyAfter(ctx context.Context, j catalog.Job, name string) {
	mark := func(msg string, fields map[string]any) error {
		fields["copy_after"] = name
		return c.cat.AddEvents(ctx, []catalog.Event{{JobID: j.ID, Time: time.Now(), Level: "info", Kind: eventCopyAfterStarted,
			Message: msg, Fields: fields}})
	}
	var mj *maintenance.Job
	for _, a := range c.plan.afterJobs(j.Policy) {
		if a.Name == name {
			mj = &a
		}
	}
	if mj == nil {
		c.logMark(mark(fmt.Sprintf("maintenance job %s no longer follows policy %s: this run's points are not copied", name, j.Policy), map[string]any{}), j, name)
		return
	}
	points, err := c.pointsOf(ctx, j)
	if err != nil {
		c.Logger().Warn("the points of a run to copy cannot be listed: trying again", "job", j.ID, "copy", name, "err", err)
		return
	}
	if len(points) == 0 {
		c.logMark(mark("the run made no backup point: nothing to copy", map[string]any{}), j, name)
		return
	}
	var copyID int64
	cctx := taskstarted.With(ctx, func(id int64) {
		copyID = id
		c.logMark(mark(fmt.Sprintf("its %d point(s) are copied by job %d (maintenance job %s, %s)", len(points), id, name, copyTarget(*mj)),
			map[string]any{"copy_job": id}), j, name)
		if err := c.cat.AddEvents(ctx, []catalog.Event{{JobID: id, Time: time.Now(), Level: "info", Kind: eventCopiesAfter,
			Message: fmt.Sprintf("copies the %d point(s) of job %d (policy %s), which ended %s", len(points), j.ID, j.Policy,
				j.FinishedAt.UTC().Format(time.RFC3339)),
			Fields: map[string]any{"copies_after": j.ID, "schedule": name}}}); err != nil {
			c.Logger().Warn("the copy's log does not say which run it follows", "job", id, "err", err)
		}
	})
	c.Logger().Info("copying a run's points after it", "job", j.ID, "policy", j.Policy, "copy", name, "points", len(points))
	err = c.copyPoints(cctx, *mj, points)
	switch {
	case err != nil && copyID == 0 && ctx.Err() == nil:
		// Refused before its job began: the run's log says why, once.
		c.logMark(mark(fmt.Sprintf("the copy by maintenance job %s could not start: %v", name, err), map[string]any{}), j, name)
	case err != nil:
		c.Logger().Warn("a copy after a run failed", "job", j.ID, "copy_job", copyID, "err", err)
	}
}

func (c *copiesAfter) logMark(err error, j catalog.Job, name string) {
	if err != nil {
		c.Logger().Warn("the run's log does not say its copy began: it may be started again", "job", j.ID, "copy", name, "err", err)
	}
}

// pointsOf lists the IDs of the points run j made.
func (c *copiesAfter) pointsOf(ctx context.Context, j catalog.Job) ([]string, error) {
	tasks, err := c.cat.ListTasks(ctx, catalog.TaskFilter{JobID: j.ID})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, t := range tasks {
		if t.BackupPointID != "" {
			ids = append(ids, t.BackupPointID)
		}
	}
	return ids, nil
}

// copyPoints copies points with maintenance job mj: to its repository
// holding a slot of the engine's limits.tasks (which backups share), or
// to its media pool, whose drives each take such a slot.
func (c *copiesAfter) copyPoints(ctx context.Context, mj maintenance.Job, points []string) error {
	from, err := c.ForRepository(ctx, mj.Repository)
	if err != nil {
		return err
	}
	if mj.Kind == "media-copy" {
		set := mj.SetFor(time.Now())
		_, err = from.Invoke(ctx, "media-copy", &api.MediaCopyInput{RepoParam: api.RepoParam{Repo: mj.Repository}, Library: mj.Library,
			Body: api.MediaCopyRequest{Pool: set.Pool, Points: points, RetentionSeconds: set.Retention.Seconds()}})
		return err
	}
	release, err := c.Limiter(ctx).Acquire(ctx, 0, func() {
		c.Logger().Info("a copy after a run waits for a slot of limits.tasks", "copy", mj.Name)
	})
	if err != nil {
		return err
	}
	defer release()
	var sel api.CopyRequest
	sel.Points = points
	if mj.ImmutableFor > 0 {
		sel.LockedUntil = policy.LockEnd(time.Now(), mj.ImmutableFor)
	}
	_, err = from.Invoke(ctx, "copy", &api.CopyInput{RepoParam: api.RepoParam{Repo: mj.Repository}, To: mj.To, Body: sel})
	return err
}
