package fleet

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// A hand-off's registration is gone once the registry holds its worker
// lost, registered anew, or not at all; a ready or draining worker of the
// same registration still runs it.
func TestRegistrationGone(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		ws   []catalog.Worker
		gone bool
		says string
	}{
		{"ready", []catalog.Worker{{Name: "dr1", Epoch: 3, State: catalog.WorkerReady}}, false, ""},
		{"draining", []catalog.Worker{{Name: "dr1", Epoch: 3, State: catalog.WorkerDraining}}, false, ""},
		{"lost", []catalog.Worker{{Name: "dr1", Epoch: 3, State: catalog.WorkerLost}}, true, "worker dr1 was lost while it ran op"},
		{"replaced", []catalog.Worker{{Name: "dr1", Epoch: 4, State: catalog.WorkerReady}}, true, "worker dr1 was replaced (registration 3, now 4)"},
		{"gone", []catalog.Worker{{Name: "other", Epoch: 3}}, true, "worker dr1 left the registry"},
	} {
		w, gone := registrationGone(ctx, registryOf{ws: c.ws}, "dr1", 3)
		if gone != c.gone {
			t.Errorf("%s: gone %v", c.name, gone)
		}
		if msg := (errWorkerGone{worker: "dr1", operation: "op", epoch: 3, now: w}).Error(); gone && !strings.HasPrefix(msg, c.says) {
			t.Errorf("%s: %q, want it to start with %q", c.name, msg, c.says)
		}
	}
}

// lockedRegistry is a registry whose workers a test changes.
type lockedRegistry struct {
	catalog.Workers
	mu sync.Mutex
	ws []catalog.Worker
}

func (r *lockedRegistry) ListWorkers(context.Context) ([]catalog.Worker, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]catalog.Worker(nil), r.ws...), nil
}

// The wait for a hand-off ends, with the loss as its cause, once the
// registry declares its worker lost.
func TestWaitEndsWhenTheWorkerIsLost(t *testing.T) {
	reg := &lockedRegistry{ws: []catalog.Worker{{Name: "dr1", Epoch: 1, State: catalog.WorkerReady}}}
	ctx, stop := whileRegistered(context.Background(), reg, "dr1", "run-replication", 1)
	defer stop()
	reg.mu.Lock()
	reg.ws[0].State = catalog.WorkerLost
	reg.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-time.After(20 * lostLook): // bounds the wait: only catches a hang
		t.Fatal("the wait did not end after the worker was declared lost")
	}
	var gone errWorkerGone
	if !errors.As(context.Cause(ctx), &gone) || !strings.Contains(gone.Error(), "worker dr1 was lost while it ran run-replication") {
		t.Fatalf("the wait ended with %v", context.Cause(ctx))
	}
}
