package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/taskstarted"
)

// JobSpec says what a long operation is, for its job in the catalog.
type JobSpec struct {
	// Kind is one of internal/job's kinds (verify, restore, gc, ...).
	Kind string
	// Object is the access-control path it acts on (/repositories/main,
	// /connections/lab/vm/web-1); Repository, VM and Policy fill the
	// job's filter columns.
	Object, Repository, VM, Policy string
	// Detail is what the face's display shows beside the kind (a point
	// ID, a socket).
	Detail string
}

// StartJob starts a long operation: a job in the catalog through the
// job manager (so that it is listed, followed and cancelled from any
// process, and recorded with its user, object, progress and log) and the
// face's display (Config.Display). The context returned is the job's: a
// cancel request in the catalog ends it. When the catalog cannot be
// opened the operation still runs, shown but unrecorded, with a warning:
// the repository is the source of truth, the catalog its history.
func (s *Service) StartJob(ctx context.Context, spec JobSpec) (context.Context, Job) {
	detail := spec.Detail
	if detail == "" {
		detail = spec.Object
	}
	if spec.VM == "" {
		spec.VM = jobVM(ctx)
	}
	if jobRecordedElsewhere(ctx) {
		return LogDisplay{Logger: s.Logger()}.Start(ctx, spec.Kind, detail)
	}
	m, err := s.jobManager(ctx)
	if err != nil {
		ctx, shown := s.display.Start(ctx, spec.Kind, detail)
		shown.Log(slog.LevelWarn, fmt.Sprintf("this %s is not recorded in the catalog: %v", spec.Kind, err))
		return ctx, shown
	}
	h, err := m.Start(ctx, job.Spec{Kind: spec.Kind, Object: spec.Object, Repository: spec.Repository, VM: spec.VM, Policy: spec.Policy})
	if err != nil {
		ctx, shown := s.display.Start(ctx, spec.Kind, detail)
		shown.Log(slog.LevelWarn, fmt.Sprintf("this %s is not recorded in the catalog: %v", spec.Kind, err))
		return ctx, shown
	}
	tctx, shown := s.display.Start(h.Context(), spec.Kind, detail)
	t := &recordedJob{h: h, shown: shown, stop: make(chan struct{})}
	if spec.Detail != "" {
		// The job's object is the repository (an ACL path): its log says
		// what within it the operation acts on (a point, a VM, a socket).
		h.Log("info", spec.Kind+" "+spec.Detail, nil)
	}
	noteSchedule(ctx, t)
	taskstarted.Note(ctx, h.ID())
	return tctx, t
}

// Run runs op as a job: it starts the job, hands op the job and its
// context, and finishes the job with op's error.
func Run[T any](ctx context.Context, s *Service, spec JobSpec, op func(context.Context, Job) (T, error)) (T, error) {
	ctx, t := s.StartJob(ctx, spec)
	out, err := op(ctx, t)
	t.Finish(err)
	return out, err
}

// recordedJob is a job recorded in the catalog and shown by the face.
type recordedJob struct {
	h     *job.Handle
	shown Job

	mu      sync.Mutex
	meter   *Meter
	polling bool
	stop    chan struct{}
	done    sync.WaitGroup
}

// progressEvery is how often a meter is read for the catalog; the
// handle writes at most one sample a second whatever comes in.
const progressEvery = time.Second

func (t *recordedJob) Log(level slog.Level, msg string, args ...any) {
	t.shown.Log(level, msg, args...)
	var fields map[string]any
	for i := 0; i+1 < len(args); i += 2 {
		if fields == nil {
			fields = map[string]any{}
		}
		fields[fmt.Sprint(args[i])] = args[i+1]
	}
	t.h.Log(levelName(level), msg, fields)
}

func levelName(l slog.Level) string {
	switch {
	case l >= slog.LevelError:
		return "error"
	case l >= slog.LevelWarn:
		return "warn"
	}
	return "info"
}

func (t *recordedJob) Progress(m Meter) {
	t.shown.Progress(m)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.meter = &m
	if !t.polling {
		t.polling = true
		t.done.Add(1)
		go t.poll()
	}
}

// poll samples the meter into the job's progress until Finish.
func (t *recordedJob) poll() {
	defer t.done.Done()
	tick := time.NewTicker(progressEvery)
	defer tick.Stop()
	var last struct {
		at   time.Time
		done int64
	}
	for {
		select {
		case <-t.stop:
			return
		case now := <-tick.C:
			p := t.sample()
			done := p.BytesDone // the rate is of bytes: items are not added in
			if !last.at.IsZero() && now.After(last.at) && p.BytesDone > 0 {
				rate := float64(done-last.done) / now.Sub(last.at).Seconds()
				p.BytesPerSecond = max(rate, 0)
				if rate > 0 && p.BytesTotal > p.BytesDone {
					p.ETA = time.Duration(float64(p.BytesTotal-p.BytesDone)/rate) * time.Second
				}
			}
			last.at, last.done = now, done
			t.h.Progress(p)
		}
	}
}

// sample reads the meter: items (packs, files) or bytes, as it counts.
func (t *recordedJob) sample() catalog.Progress {
	t.mu.Lock()
	m := t.meter
	t.mu.Unlock()
	var p catalog.Progress
	if m == nil {
		return p
	}
	var done, total int64
	if m.Done != nil {
		done = m.Done()
	}
	if m.Total != nil {
		total = m.Total()
	}
	if m.Items {
		p.ItemsDone, p.ItemsTotal = done, total
	} else {
		p.BytesDone, p.BytesTotal = done, total
	}
	return p
}

func (t *recordedJob) Finish(err error) {
	close(t.stop)
	t.done.Wait()
	t.mu.Lock()
	metered := t.meter != nil
	t.mu.Unlock()
	if metered {
		t.h.Progress(t.sample())
	}
	t.shown.Finish(err)
	// The end is recorded even when the operation's context was
	// cancelled: that is what it records.
	ctx, cancel := context.WithTimeout(context.Background(), catalogTimeout)
	defer cancel()
	status, msg := taskStatus(t.h, err)
	if _, ferr := t.h.Finish(ctx, status, msg); ferr != nil {
		slog.Default().Warn("recording the end of a task failed", "task", t.h.ID(), "err", ferr)
	}
}

// taskStatus is the final status of a job by its operation's error:
// partial results are partial, a cancelled context is cancelled.
func taskStatus(h *job.Handle, err error) (catalog.Status, string) {
	if err == nil {
		return catalog.StatusSuccess, ""
	}
	switch {
	case Classify(err) == api.Partial:
		return catalog.StatusPartial, err.Error()
	case Classify(err) == api.Cancelled, errors.Is(err, context.Canceled) && h.Context().Err() != nil:
		return catalog.StatusCancelled, err.Error()
	}
	return catalog.StatusFailed, err.Error()
}

// RepoName names a repository location for job objects: the name a
// request bound it by (the server's ForRepository), else the name of the
// repositories entry at that location, else "default" (the repository of
// --repo / COFFER_REPO, which has no name of its own).
func (s *Service) RepoName(location string) string {
	if location == s.Config.Repository.Location && s.BoundRepo != "" && s.BoundRepo != DefaultRepository {
		return s.BoundRepo
	}
	cfg := s.Config.Engine
	if st := s.conf.cached(); st != nil { // the configuration in effect, as last read
		cfg = st.Engine
	}
	for _, r := range cfg.Repositories {
		if r.Location == location {
			return r.Name
		}
	}
	return DefaultRepositoryName
}

// DefaultRepositoryName names the default repository (--repo) in job
// objects and metrics when no repositories entry is at its location.
const DefaultRepositoryName = DefaultRepository

// RepoJob is the spec of an operation on a repository location.
func (s *Service) RepoJob(kind, location string) JobSpec {
	name := s.RepoName(location)
	return JobSpec{Kind: kind, Object: "/repositories/" + name, Repository: name}
}

// PointJob is the spec of an operation on a backup point of the default
// repository: the repository is its object, the point its detail. The
// VM, when the reference names one (a point of a VM), is added by the
// operation once the point is found.
func (s *Service) PointJob(kind, ref string) JobSpec {
	spec := s.RepoJob(kind, s.Config.Repository.Location)
	spec.Detail = ref
	return spec
}

// Kinds of the backups the command line runs itself (a policy's run is
// the engine's backup-policy).
const (
	KindBackupVMJob   = job.KindBackupVM
	KindBackupDiskJob = job.KindBackupDisk
)

// WithDetail sets what the display shows beside the job's kind.
func WithDetail(spec JobSpec, detail string) JobSpec {
	spec.Detail = detail
	return spec
}

// NamedJob is the spec of an operation on a repository named as the
// configuration names it ("" and "default": the default repository).
func (s *Service) NamedJob(kind, name string) JobSpec {
	if name == "" || name == DefaultRepositoryName {
		return s.RepoJob(kind, s.Config.Repository.Location)
	}
	return JobSpec{Kind: kind, Object: "/repositories/" + name, Repository: name}
}
