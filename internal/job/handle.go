package job

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// writeTimeout bounds one write of a job's log or progress: a catalog
// that does not answer (a PostgreSQL server gone, a SQLite file locked by
// a stuck process) delays the record, never the work.
const writeTimeout = 30 * time.Second

// retryAfter is the wait before writing again after a failed write.
const retryAfter = time.Second

// Handle is a running job, held by the code that does its work. Its
// methods never block on the catalog (except Begin, Flush and Finish):
// lines and progress samples are queued and written by a goroutine of the
// handle, as soon as it can, every line queued meanwhile in one
// transaction (so a chatty job costs few transactions). Lines come at
// most every Options.LineInterval: a policy run of a thousand VMs logs
// a line as each ends, tens a second, and each write is a round trip
// and a notice to every server. A write that fails is retried; the work
// goes on.
type Handle struct {
	m      *Manager
	id     int64
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu         sync.Mutex
	job        Record
	lines      []Line    // queued, not yet written
	progress   *Progress // newest sample not yet written
	lastBeat   time.Time
	lastSample time.Time
	lastLines  time.Time // the last write of lines
	queued     int64     // lines ever queued
	written    int64     // lines ever written
	lastErr    error
	flushed    chan struct{} // closed (and replaced) after every write attempt
	warnedGone bool
	finishing  bool

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

func newHandle(m *Manager, ctx context.Context, j Record) *Handle {
	tctx, cancel := context.WithCancelCause(ctx)
	now := time.Now()
	return &Handle{m: m, id: j.ID, ctx: tctx, cancel: cancel, job: j, lastBeat: now, flushed: make(chan struct{}),
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
}

// ID is the job's ID.
func (h *Handle) ID() int64 { return h.id }

// Job returns the job as this process knows it.
func (h *Handle) Job() Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.job
}

// Context ends when the job is cancelled, from this process or another
// (its cause then wraps ErrCancelled), when the context given to Start
// ends, or after Finish.
func (h *Handle) Context() context.Context { return h.ctx }

func (h *Handle) signal() {
	select {
	case h.kick <- struct{}{}:
	default:
	}
}

// Log appends a line to the job's log.
func (h *Handle) Log(level, msg string, fields map[string]any) {
	h.Record(Line{Level: level, Kind: "log", Message: msg, Fields: fields})
}

// Logf appends a formatted info line to the job's log.
func (h *Handle) Logf(format string, args ...any) { h.Log("info", fmt.Sprintf(format, args...), nil) }

// Record appends lines to the job's log as they are (the engine's events,
// with their kinds and VM tasks); their JobID is the task's.
func (h *Handle) Record(lines ...Line) {
	now := time.Now()
	h.mu.Lock()
	if h.finishing {
		h.mu.Unlock()
		h.m.log.Debug("line logged after its task finished", "task", h.id, "lines", len(lines))
		return
	}
	for _, l := range lines {
		l.JobID = h.id
		if l.Time.IsZero() {
			l.Time = now
		}
		if _, err := json.Marshal(l.Fields); err != nil {
			// A line the catalog cannot store would block the log.
			l.Fields = map[string]any{"unrecordable_fields": err.Error()}
		}
		h.lines = append(h.lines, l)
	}
	h.queued += int64(len(lines))
	h.mu.Unlock()
	h.signal()
}

// Progress records a progress sample. Samples are written at most every
// Options.ProgressInterval (the newest wins) and then reach subscribers.
func (h *Handle) Progress(p Progress) {
	h.mu.Lock()
	if !h.finishing {
		h.progress = &p
	}
	h.mu.Unlock()
	h.signal()
}

// SetCounts sets the counts of a job's parts (a policy run's VMs: total,
// succeeded, failed), written with the next change of status.
func (h *Handle) SetCounts(total, ok, failed int) {
	h.mu.Lock()
	h.job.TasksTotal, h.job.TasksOK, h.job.TasksFail = total, ok, failed
	h.mu.Unlock()
}

// Begin marks a queued job running.
func (h *Handle) Begin(ctx context.Context) error {
	h.mu.Lock()
	h.job.Status, h.job.StartedAt = catalog.StatusRunning, h.m.now()
	j := h.job
	h.mu.Unlock()
	if err := h.m.cat.UpdateJob(ctx, &j); err != nil {
		return fmt.Errorf("record task %d as running: %w", h.id, err)
	}
	h.m.hub.publishState(j, EventStatus)
	return nil
}

// Flush waits until every line logged so far is written.
func (h *Handle) Flush(ctx context.Context) error {
	h.mu.Lock()
	target := h.queued
	h.mu.Unlock()
	h.signal()
	for {
		h.mu.Lock()
		written, err, ch := h.written, h.lastErr, h.flushed
		h.mu.Unlock()
		if written >= target {
			return nil
		}
		select {
		case <-ch:
			h.mu.Lock()
			failed := h.lastErr != nil && h.written < target
			err = h.lastErr
			h.mu.Unlock()
			if failed {
				return fmt.Errorf("write the log of task %d: %w", h.id, err)
			}
		case <-h.done:
			return fmt.Errorf("task %d finished with lines unwritten: %v", h.id, err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// cancelRequested cancels the job's context: a cancel was requested at t.
func (h *Handle) cancelRequested(t time.Time) {
	h.mu.Lock()
	first := h.job.CancelRequested.IsZero() && !h.finishing
	if first {
		h.job.CancelRequested = t
	}
	j := h.job
	h.mu.Unlock()
	if first {
		h.m.hub.publishState(j, EventStatus)
	}
	h.cancel(fmt.Errorf("%w (requested at %s)", ErrCancelled, t.Local().Format(time.TimeOnly)))
}

// loop writes what is queued until Finish.
func (h *Handle) loop() {
	defer close(h.done)
	timer := time.NewTimer(h.m.o.HeartbeatInterval)
	defer timer.Stop()
	for {
		select {
		case <-h.kick:
			if wait := h.linesHeld(); wait > 0 {
				// Lines within LineInterval of the last ones wait for
				// it (and a heartbeat due meanwhile with them).
				timer.Reset(wait)
				continue
			}
		case <-timer.C:
		case <-h.stop:
			h.write(true)
			return
		}
		timer.Reset(h.write(false))
	}
}

// linesHeld is how long queued lines wait before they are written: until
// LineInterval after the last lines written.
func (h *Handle) linesHeld() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.lines) == 0 {
		return 0
	}
	return time.Until(h.lastLines.Add(h.m.o.LineInterval))
}

// write writes the queued lines, then the progress sample when one is due
// (or else a heartbeat when one is due), and returns how long to wait
// before the next write. The final write (Finish) writes only lines:
// Finish writes the last progress with the status.
func (h *Handle) write(final bool) time.Duration {
	o := h.m.o
	now := time.Now()
	h.mu.Lock()
	lines := h.lines
	h.lines = nil
	if len(lines) > 0 {
		h.lastLines = now
	}
	var sample *Progress
	if !final && h.progress != nil && now.Sub(h.lastSample) >= o.ProgressInterval {
		sample, h.progress = h.progress, nil
	}
	beat := !final && (sample != nil || now.Sub(h.lastBeat) >= o.HeartbeatInterval)
	h.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	var errs []error
	if len(lines) > 0 {
		if err := h.m.cat.AddEvents(ctx, lines); err != nil {
			errs = append(errs, err)
			h.mu.Lock()
			h.lines = append(lines, h.lines...)
			h.mu.Unlock()
		} else {
			h.mu.Lock()
			h.written += int64(len(lines))
			h.job.LogLines = max(h.job.LogLines, lines[len(lines)-1].Seq)
			h.mu.Unlock()
			h.m.hub.publishLines(h.id, lines)
		}
	}
	if beat {
		cancelAt, err := h.m.cat.Heartbeat(ctx, h.id, sample)
		h.mu.Lock()
		switch {
		case err == nil:
			h.lastBeat = now
			if sample != nil {
				h.lastSample, h.job.Progress = now, *sample
			}
		case errors.Is(err, catalog.ErrNotFound):
			// Another process judged this one gone and ended the job;
			// the work goes on and Finish records its real end.
			h.lastBeat = now
			if !h.warnedGone {
				h.warnedGone = true
				h.m.log.Warn("another process marked this running task as ended; its end will be recorded when it finishes", "task", h.id)
			}
		default:
			errs = append(errs, err)
			if sample != nil && h.progress == nil {
				h.progress = sample
			}
		}
		j := h.job
		h.mu.Unlock()
		if err == nil && sample != nil {
			h.m.hub.publishState(j, EventProgress)
		}
		if err == nil && !cancelAt.IsZero() {
			h.cancelRequested(cancelAt)
		}
	}
	err := errors.Join(errs...)
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case err != nil && h.lastErr == nil:
		h.m.log.Warn("recording a task failed; retrying every second", "task", h.id, "err", err)
	case err == nil && h.lastErr != nil:
		h.m.log.Info("recording the task works again", "task", h.id)
	}
	h.lastErr = err
	close(h.flushed)
	h.flushed = make(chan struct{})
	switch {
	case err != nil:
		return retryAfter
	case len(h.lines) > 0:
		return max(time.Until(h.lastLines.Add(o.LineInterval)), 0)
	}
	wait := o.HeartbeatInterval - time.Since(h.lastBeat)
	if h.progress != nil {
		wait = min(wait, o.ProgressInterval-time.Since(h.lastSample))
	}
	return max(wait, 0)
}

// Finish ends the job with a final status and its error message (empty
// on success): it writes what is queued, then the status, the counts and
// the last progress, and tells subscribers. The job's context ends.
func (h *Handle) Finish(ctx context.Context, status Status, msg string) (Record, error) {
	if !status.Done() {
		return h.Job(), fmt.Errorf("finish task %d: %q is not a final status", h.id, status)
	}
	h.mu.Lock()
	if h.finishing {
		h.mu.Unlock()
		return h.Job(), fmt.Errorf("task %d is already finished", h.id)
	}
	h.finishing = true
	h.mu.Unlock()
	close(h.stop)
	<-h.done
	defer h.cancel(errors.New("task finished"))
	h.mu.Lock()
	j := h.job
	j.Status, j.Error, j.FinishedAt = status, msg, h.m.now()
	if h.progress != nil {
		j.Progress = *h.progress
	}
	lines := h.lines
	h.lines = nil
	h.mu.Unlock()
	var errs []error
	if len(lines) > 0 {
		if err := h.m.cat.AddEvents(ctx, lines); err != nil {
			errs = append(errs, fmt.Errorf("write the last %d lines of task %d: %w", len(lines), h.id, err))
		} else {
			h.m.hub.publishLines(h.id, lines)
		}
	}
	if err := h.updateRetrying(ctx, &j); err != nil {
		errs = append(errs, fmt.Errorf("record the end of task %d: %w", h.id, err))
	} else if cur, err := h.m.cat.GetJob(ctx, h.id); err == nil {
		j = cur // with the lines and cancel request of other processes
	}
	h.mu.Lock()
	h.job = j
	h.mu.Unlock()
	h.m.release(h)
	h.m.hub.publishState(j, EventStatus)
	if h.m.o.Finished != nil {
		h.m.o.Finished(j)
	}
	return j, errors.Join(errs...)
}

// updateRetrying writes the job's end, trying a few times: a job left
// "running" by a passing catalog error would stay so while this process
// lives.
func (h *Handle) updateRetrying(ctx context.Context, j *Record) error {
	var err error
	for attempt := range 3 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return errors.Join(err, ctx.Err())
			case <-time.After(time.Duration(attempt) * retryAfter):
			}
		}
		if err = h.m.cat.UpdateJob(ctx, j); err == nil {
			return nil
		}
	}
	return err
}

// End finishes the job by the outcome of its work: success without an
// error, cancelled when its context was cancelled, failed otherwise.
func (h *Handle) End(ctx context.Context, err error) (Record, error) {
	switch {
	case err == nil:
		return h.Finish(ctx, catalog.StatusSuccess, "")
	case h.ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(context.Cause(h.ctx), ErrCancelled)):
		return h.Finish(ctx, catalog.StatusCancelled, err.Error())
	}
	return h.Finish(ctx, catalog.StatusFailed, err.Error())
}
