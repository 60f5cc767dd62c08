package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// recorder batches catalog writes (task updates, events, backup points) so
// the catalog is never the bottleneck: with thousands of VMs a write per
// state change would be thousands of transactions; instead one flush every
// interval (or when much is pending) writes everything in three.
//
// Catalog failures never fail backups: they are logged, and the data stays
// pending for the next flush.
type recorder struct {
	cat      catalog.Catalog
	log      *slog.Logger
	interval time.Duration

	// flushing is held for a whole flush: forget waits for the one under
	// way, whose snapshot may hold the state it forgets.
	flushing sync.Mutex
	mu       sync.Mutex
	tasks    map[int64]catalog.Task // newest state per task ID
	events   []catalog.Event
	points   []catalog.BackupPoint
	kick     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	err      error // last flush error

	// afterFlush, if set, runs after every periodic flush (the direct
	// run's heartbeat).
	afterFlush func(context.Context) error
}

const flushThreshold = 512

func newRecorder(cat catalog.Catalog, log *slog.Logger, interval time.Duration, afterFlush func(context.Context) error) *recorder {
	r := &recorder{cat: cat, log: log, interval: interval, tasks: map[int64]catalog.Task{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), afterFlush: afterFlush}
	go r.loop()
	return r
}

func (r *recorder) loop() {
	defer close(r.done)
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		case <-r.kick:
		}
		_ = r.flush(context.Background())
		if r.afterFlush != nil {
			if err := r.afterFlush(context.Background()); err != nil {
				r.log.Warn("catalog write failed; will retry", "err", err)
			}
		}
	}
}

func (r *recorder) task(t catalog.Task) {
	r.mu.Lock()
	r.tasks[t.ID] = t
	r.mu.Unlock()
}

func (r *recorder) event(e catalog.Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	r.mu.Lock()
	r.events = append(r.events, e)
	n := len(r.events)
	r.mu.Unlock()
	if n >= flushThreshold {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
}

func (r *recorder) point(p catalog.BackupPoint) {
	r.mu.Lock()
	r.points = append(r.points, p)
	r.mu.Unlock()
}

// forget drops the pending state of task id, once no flush that may
// hold it is under way: another process writes that row from now on (a
// worker's grant and completion, StartRecorder) and no older state of
// this process's may land after its writes.
func (r *recorder) forget(id int64) {
	r.flushing.Lock()
	defer r.flushing.Unlock()
	r.mu.Lock()
	delete(r.tasks, id)
	r.mu.Unlock()
}

// flush writes everything pending; what fails stays pending.
func (r *recorder) flush(ctx context.Context) error {
	r.flushing.Lock()
	defer r.flushing.Unlock()
	r.mu.Lock()
	tasks := make([]*catalog.Task, 0, len(r.tasks))
	for _, t := range r.tasks {
		tasks = append(tasks, &t)
	}
	events, points := r.events, r.points
	r.tasks, r.events, r.points = map[int64]catalog.Task{}, nil, nil
	r.mu.Unlock()
	var errs []error
	if len(tasks) > 0 {
		if err := r.cat.UpdateTasks(ctx, tasks); err != nil {
			errs = append(errs, err)
			r.mu.Lock()
			for _, t := range tasks {
				if _, newer := r.tasks[t.ID]; !newer {
					r.tasks[t.ID] = *t
				}
			}
			r.mu.Unlock()
		}
	}
	if len(events) > 0 {
		if err := r.cat.AddEvents(ctx, events); err != nil {
			errs = append(errs, err)
			r.mu.Lock()
			r.events = append(events, r.events...)
			r.mu.Unlock()
		}
	}
	if len(points) > 0 {
		if err := r.cat.PutBackupPoints(ctx, points); err != nil {
			errs = append(errs, err)
			r.mu.Lock()
			r.points = append(points, r.points...)
			r.mu.Unlock()
		}
	}
	err := errors.Join(errs...)
	if err != nil {
		r.log.Warn("catalog write failed; will retry", "err", err)
	}
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
	return err
}

// close stops the background flushing and writes what is left.
func (r *recorder) close(ctx context.Context) error {
	close(r.stop)
	<-r.done
	return r.flush(ctx)
}
