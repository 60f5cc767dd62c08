package service

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	"github.com/coffer-backup/coffer/internal/api"
)

// Remote runs an operation by ID on a named worker of the fleet and
// returns its document (internal/fleet's servers' client: the operation
// handed to the worker's queue, its outcome waited for). The kernel only
// holds one: the domains that let a request name a worker call RunOn.
type Remote interface {
	RunOn(ctx context.Context, worker, operation string, in any) (json.RawMessage, error)
}

// remoteSlot is the Remote of the process, shared by the services it
// derives; a server sets it once its fleet's client runs.
type remoteSlot struct {
	mu     sync.Mutex
	remote Remote
}

// SetRemote makes r the process's Remote until undo.
func (s *Service) SetRemote(r Remote) (undo func()) {
	s.remote.mu.Lock()
	defer s.remote.mu.Unlock()
	s.remote.remote = r
	return func() {
		s.remote.mu.Lock()
		defer s.remote.mu.Unlock()
		if s.remote.remote == r {
			s.remote.remote = nil
		}
	}
}

// RemoteRunner is the process's Remote, nil where work reaches no
// worker; what else it can do (choose a worker) the domains that need it
// ask of it.
func (s *Service) RemoteRunner() Remote {
	s.remote.mu.Lock()
	defer s.remote.mu.Unlock()
	return s.remote.remote
}

// OnWorker runs operation id on the worker that w names, when it names
// one: the same input, with the worker cleared, so that the worker runs
// it in its own process, on its own host's paths and devices. This
// process records it as the job spec describes (the worker records no job
// of its own for a hand-off: WithJobRecordedElsewhere), so the catalog
// holds it whatever the worker's role may write. remote is false when w
// names none and the caller runs the operation itself.
func OnWorker[T any](ctx context.Context, s *Service, id string, w *api.WorkerParam, in any, spec JobSpec) (out T, remote bool, err error) {
	worker := w.Worker
	if worker == "" {
		return out, false, nil
	}
	r := s.RemoteRunner()
	if r == nil {
		return out, true, api.Errorf(api.Invalid,
			"%s cannot run on worker %s here: work reaches workers only through a server on a PostgreSQL catalog", id, worker)
	}
	w.Worker = ""
	defer func() { w.Worker = worker }()
	out, err = Run(ctx, s, spec, func(ctx context.Context, t Job) (T, error) {
		t.Log(slog.LevelInfo, fmt.Sprintf("%s runs on worker %s", id, worker), "worker", worker)
		return runOn[T](ctx, r, worker, id, in)
	})
	return out, true, err
}

func runOn[T any](ctx context.Context, r Remote, worker, id string, in any) (out T, err error) {
	doc, err := r.RunOn(ctx, worker, id, in)
	if len(doc) > 0 && string(doc) != "null" {
		// A document may come with an error (a boot verification that
		// failed a step returns its result too).
		if jerr := json.Unmarshal(doc, &out); jerr != nil {
			return out, api.WithClass(api.Internal, fmt.Errorf("worker %s's answer to %s: %w", worker, id, jerr))
		}
	}
	return out, err
}

type recordedElsewhereKey struct{}

// WithJobRecordedElsewhere marks ctx as the run of an operation whose job
// another process records (a worker running a server's hand-off): its
// jobs go to this process's log only.
func WithJobRecordedElsewhere(ctx context.Context) context.Context {
	return context.WithValue(ctx, recordedElsewhereKey{}, true)
}

func jobRecordedElsewhere(ctx context.Context) bool {
	b, _ := ctx.Value(recordedElsewhereKey{}).(bool)
	return b
}

// JobRecordedElsewhere reports whether ctx is a worker's run of a
// server's hand-off, whose outcome the server records (the catalog rows
// beside the job too: a worker's role may not write them).
func JobRecordedElsewhere(ctx context.Context) bool { return jobRecordedElsewhere(ctx) }
