package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/service/apidoc"
)

// NewEngine builds an engine over the given connections; more set
// options the caller adds (the server's fleet: its UnitRunner). Problems
// cleaning up leftovers of earlier runs are warnings: they do not stop
// the caller.
func (s *Service) NewEngine(ctx context.Context, t Job, cfg *policy.Config, cat catalog.Catalog, conns *Connectors, more ...func(*engine.Options)) (*engine.Engine, error) {
	o := engine.Options{Config: cfg, Catalog: cat, Connectors: conns.Conns, StorageSnapshotters: conns.Storage,
		OpenRepository: s.OpenNamed, Logger: s.log, Worker: s.Config.Worker, Predict: s.predictor(cat)}
	// Jobs are tasks of the control plane, recorded once, through the
	// task manager (its notices, cancel and notifications); without a
	// catalog for it the engine records them itself.
	if m, err := s.jobManager(ctx); err == nil {
		o.StartJob = engine.Starter(m.StartJob)
	} else {
		t.Log(slog.LevelWarn, fmt.Sprintf("jobs are recorded without the task manager: %v", err))
	}
	for _, set := range more { // after StartJob: an option may wrap it
		set(&o)
	}
	eng, err := engine.New(ctx, o)
	if eng == nil {
		return nil, err
	}
	if err != nil {
		t.Log(slog.LevelWarn, fmt.Sprintf("cleaning up leftovers of earlier runs failed: %v", err))
	}
	return eng, nil
}

// servingEngine is the server's engine while this process serves
// (RunSchedules) and it has a connector for every connection named, else
// nil. A run started through the API then goes through it, under the
// limits the scheduled runs are held to: an engine of its own would
// count its VMs apart and, beside a scheduled run, double what a host or
// datastore carries. A connection the engine does not have yet (created
// an instant ago, before the reload reached the engine) gets an engine
// of its own, said in the task's log.
func (s *Service) servingEngine(t Job, connections []string) *engine.Engine {
	eng := s.serving.Load()
	if eng == nil {
		return nil
	}
	for _, c := range connections {
		if _, ok := eng.Connector(c); !ok {
			t.Log(slog.LevelWarn, fmt.Sprintf("the server's engine has no connection %s yet: this run's limits are its own", c))
			return nil
		}
	}
	return eng
}

// Serving reports whether this process runs the schedules' engine, which
// the runs it starts join (servingEngine).
func (s *Service) Serving() bool { return s.serving.Load() != nil }

// predictor is the engine's prediction of each run (Config.Predictor),
// none when the service was composed without one.
func (s *Service) predictor(cat catalog.Catalog) engine.Predictor {
	if s.Config.Predictor == nil {
		return nil
	}
	return s.Config.Predictor(cat)
}

// EngineServing is the engine of this process's RunSchedules while it
// runs, nil otherwise.
func (s *Service) EngineServing() *engine.Engine { return s.serving.Load() }

// Serve makes eng the engine this process serves with (RunSchedules)
// until the returned function is called.
//
// more are options that an engine a run of this process makes of its own
// (servingEngine returns nil) takes too: what every run of a server's
// records, such as the copies that follow it.
func (s *Service) Serve(eng *engine.Engine, more ...func(*engine.Options)) (stop func()) {
	s.servingOptions.Store(&more)
	s.serving.Store(eng)
	if g := s.servingSoon.Load(); g != nil {
		g.open()
	}
	return func() {
		if s.serving.CompareAndSwap(eng, nil) {
			s.servingOptions.Store(nil)
		}
	}
}

// servingGate is closed once a server's schedules' engine serves, or its
// RunSchedules gave up before.
type servingGate struct {
	ch   chan struct{}
	once sync.Once
}

func (g *servingGate) open() { g.once.Do(func() { close(g.ch) }) }

// ExpectServing says this process is a server whose RunSchedules will
// serve an engine: until then (or until done is called, when it ends
// before), the runs started here wait for it (AwaitServing). A run that
// came in first, while the server was still starting, would otherwise run
// in an engine of its own and miss what the server's runs record (the
// copies after a policy's run).
func (s *Service) ExpectServing() (done func()) {
	g := &servingGate{ch: make(chan struct{})}
	s.servingSoon.Store(g)
	return g.open
}

// AwaitServing waits until the engine a server is about to serve is
// served (ExpectServing); at once in every other process.
func (s *Service) AwaitServing(ctx context.Context) error {
	g := s.servingSoon.Load()
	if g == nil {
		return nil
	}
	select {
	case <-g.ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// PolicyRun is a policy's backup run in progress.
type PolicyRun struct {
	// Warnings say what the policy will do differently from how its
	// settings read (the findings of `policy check`).
	Warnings []api.Finding
	job      *engine.Job
	close    func(error)
}

// Done is closed when the run has ended.
func (r *PolicyRun) Done() <-chan struct{} { return r.job.Done() }

// Progress is the run's state now.
func (r *PolicyRun) Progress() api.JobProgress {
	p := r.job.Progress()
	out := api.JobProgress{JobID: p.JobID, Policy: p.Policy, ElapsedSeconds: p.Elapsed.Seconds(), VMs: p.VMs, Done: p.Done,
		Failed: p.Failed, Running: p.Running, TotalBytes: p.BytesTotal, DoneBytes: p.BytesDone, ETASeconds: p.ETA.Seconds(),
		RunningVMs: []api.VMProgress{}}
	for _, v := range p.RunningVMs {
		out.RunningVMs = append(out.RunningVMs, api.VMProgress{VM: v.VM, Attempt: v.Attempt, DoneBytes: v.BytesDone,
			TotalBytes: v.BytesTotal, ElapsedSeconds: v.Elapsed.Seconds()})
	}
	return out
}

// Tasks are the run's per-VM tasks as they are now.
func (r *PolicyRun) Tasks() []api.VMTask {
	out := []api.VMTask{}
	for _, t := range r.job.Tasks() {
		out = append(out, vmTaskDoc(t))
	}
	return out
}

// Wait waits for the run to end and returns its job. A run where some VMs
// failed comes back with a partial error, a cancelled one with a cancelled
// error, one where all failed with an internal error.
func (r *PolicyRun) Wait() (doc *api.Job, err error) {
	defer func() { r.close(err) }()
	res, err := r.job.Wait()
	if err != nil {
		return nil, err
	}
	j := res.Job
	d := JobDoc(j, res.Tasks, nil)
	switch j.Status {
	case catalog.StatusSuccess:
		return &d, nil
	case catalog.StatusPartial:
		return &d, api.Errorf(api.Partial, "job %d: %s", j.ID, j.Error)
	case catalog.StatusCancelled:
		return &d, api.Errorf(api.Cancelled, "%w: job %d: %s", context.Canceled, j.ID, j.Error)
	}
	return &d, api.Errorf(api.Internal, "job %d failed: %s", j.ID, j.Error)
}

// RunPolicy starts a backup run of a policy now, within every configured
// limit, and records it in the catalog. The run goes on until it ends or
// ctx is cancelled (running VMs then release their hypervisor snapshots,
// queued ones are not started).
func (s *Service) RunPolicy(ctx context.Context, name string) (*PolicyRun, error) {
	if err := s.AwaitServing(ctx); err != nil {
		return nil, err
	}
	cfg, warnings, err := s.PolicyConfig(ctx)
	if err != nil {
		return nil, err
	}
	p, ok := cfg.Policy(name)
	if !ok {
		return nil, Invalidf("no policy named %q (`coffer policy check` lists them)", name)
	}
	if err := s.RefuseElsewhere(ctx, cfg, p.ConnectionNames()); err != nil {
		return nil, err
	}
	ctx, t := s.display.Start(ctx, "backup-policy", p.Name)
	for _, f := range warnings[p.Name] {
		t.Log(slog.LevelWarn, f.Message)
	}
	fail := func(err error) (*PolicyRun, error) {
		t.Finish(err)
		return nil, err
	}
	if eng := s.servingEngine(t, p.ConnectionNames()); eng != nil {
		job, err := eng.Start(ctx, p)
		if err != nil {
			return fail(err)
		}
		return &PolicyRun{Warnings: apidoc.NonNil(warnings[p.Name]), job: job, close: t.Finish}, nil
	}
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		return fail(err)
	}
	conns, err := s.OpenConnectors(ctx, cfg, p.ConnectionNames())
	if err != nil {
		cat.Close()
		return fail(err)
	}
	var more []func(*engine.Options)
	if o := s.servingOptions.Load(); o != nil {
		more = *o
	}
	eng, err := s.NewEngine(ctx, t, cfg, cat, conns, more...)
	if err != nil {
		conns.Close()
		cat.Close()
		return fail(err)
	}
	job, err := eng.Start(ctx, p)
	if err != nil {
		err = errors.Join(err, eng.Close())
		conns.Close()
		cat.Close()
		return fail(err)
	}
	run := &PolicyRun{Warnings: apidoc.NonNil(warnings[p.Name]), job: job}
	run.close = func(err error) {
		if cerr := eng.Close(); cerr != nil {
			s.log.Warn("closing a policy run's engine", "policy", p.Name, "err", cerr)
		}
		conns.Close()
		cat.Close()
		t.Finish(err)
	}
	return run, nil
}

// ListJobs lists up to limit jobs the catalog recorded, newest first,
// whoever may see them.
func (s *Service) ListJobs(ctx context.Context, in *api.ListJobsInput, limit int) ([]api.Job, error) {
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	s.markInterrupted(ctx, cat)
	f := catalog.JobFilter{Policy: in.Policy, Kind: in.Kind, User: in.User, VM: in.VM, Status: catalog.Status(in.Status),
		Since: in.Since, Until: in.Until, Limit: limit}
	if in.After > 0 {
		last, err := cat.GetJob(ctx, in.After)
		if errors.Is(err, catalog.ErrNotFound) {
			return nil, api.Errorf(api.NotFound, "job %d, the last of the previous page, is no longer in the catalog "+
				"(pruned): list again from the newest", in.After)
		}
		if err != nil {
			return nil, err
		}
		f.After = last.Cursor()
	}
	jobs, err := cat.ListJobs(ctx, f)
	if err != nil {
		return nil, err
	}
	out := []api.Job{}
	for _, j := range jobs {
		out = append(out, JobDoc(j, nil, nil))
	}
	return out, nil
}

// JobPageInput selects the part of a job's tasks and log a job document
// holds: a policy run over 10,000 VMs has 10,000 of each.
type JobPageInput struct {
	ID int64
	// Tasks is the most per-VM tasks, those after the task TasksAfter
	// (0: all); Log the most lines from the start of the log (0: all).
	Tasks      int
	TasksAfter int64
	Log        int
}

// JobPage returns one job with a page of its per-VM tasks and the first
// lines of its log.
func (s *Service) JobPage(ctx context.Context, in JobPageInput) (*api.Job, error) {
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	s.markInterrupted(ctx, cat)
	j, err := cat.GetJob(ctx, in.ID)
	if err != nil {
		return nil, fmt.Errorf("job %d: %w", in.ID, err)
	}
	tasks, err := cat.ListTasks(ctx, catalog.TaskFilter{JobID: in.ID, AfterID: in.TasksAfter, Limit: in.Tasks})
	if err != nil {
		return nil, err
	}
	events, err := cat.JobLog(ctx, in.ID, 0, in.Log) // in the order recorded
	if err != nil {
		return nil, err
	}
	doc := JobDoc(j, apidoc.NonNil(tasks), apidoc.NonNil(events))
	return &doc, nil
}

// JobSummary returns one job without its tasks and log: what deciding
// who may see or cancel it needs, one row however large the job.
func (s *Service) JobSummary(ctx context.Context, id int64) (*api.Job, error) {
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	s.markInterrupted(ctx, cat)
	j, err := cat.GetJob(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("job %d: %w", id, err)
	}
	doc := JobDoc(j, nil, nil)
	return &doc, nil
}

// markInterrupted marks the jobs whose process died as failed
// ("interrupted") before they are shown, rather than show them running
// forever. Listing goes on if that fails (a read-only catalog).
func (s *Service) markInterrupted(ctx context.Context, cat catalog.Catalog) {
	if _, err := job.MarkInterrupted(ctx, cat, job.Options{Logger: s.log}); err != nil {
		s.log.Warn("marking the jobs of processes that died failed", "err", err)
	}
}

// Limiter is the engine's limiter that work outside a policy's job
// shares (a copy to media's drives): the server's engine while this
// process serves, so that drives and backups queue for the same
// limits.tasks and show in the same coffer_limit_slots pools; else one of
// this process, made with limits.tasks when first needed.
func (s *Service) Limiter(ctx context.Context) *engine.Limiter {
	if eng := s.serving.Load(); eng != nil {
		return eng.Limiter()
	}
	s.limiterMu.Lock()
	defer s.limiterMu.Unlock()
	if s.ownLimiter == nil {
		tasks := policy.Limits{}.WithDefaults().Tasks
		if cfg, err := s.EngineConfig(ctx); err == nil {
			tasks = cfg.Limits.WithDefaults().Tasks
		}
		s.ownLimiter = engine.NewLimiter(tasks)
	}
	return s.ownLimiter
}
