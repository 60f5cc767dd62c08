package fleet

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/store/local"
)

// A lost worker's sessions are ended in the repositories its units in
// flight write to: those of its lost registration (and earlier ones), not
// its next registration's nor another worker's; a fenced unit's are ended
// alone. Nothing is ended for units no longer in flight.
func TestLostWorkersSessionsAreEnded(t *testing.T) {
	ctx := context.Background()
	l := repotest.NewLocal(t, repo.InitOptions{})
	r := l.R
	var opened atomic.Int32
	// The leader opens the repository anew (service.OpenNamed), and
	// closes it with its store.
	s := &Sessions{Open: func(ctx context.Context, name string) (*repo.Repository, error) {
		if name != "main" {
			t.Errorf("opened repository %q, want main", name)
		}
		opened.Add(1)
		st, err := local.Open(l.Dir)
		if err != nil {
			return nil, err
		}
		return repo.Open(ctx, st, []byte(repotest.Password), repo.Options{})
	}}
	owners := []struct {
		worker string
		epoch  int64
	}{{"a", 2}, {"a", 3}, {"a", 4}, {"b", 1}}
	var release []func()
	for _, o := range owners {
		w, err := r.NewWriterFor(ctx, SessionOwner(o.worker, o.epoch), "unit")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.Close(ctx) })
		release = append(release, s.hold(o.worker, o.epoch, "main"))
	}
	ended := func() map[string]bool {
		leases, err := r.Leases(ctx)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]bool{}
		for _, l := range leases {
			out[l.Owner] = !l.Ended.IsZero()
		}
		return out
	}

	s.EndWorker(ctx, Worker{Name: "a", Epoch: 3})
	got := ended()
	if !got["worker a epoch 2"] || !got["worker a epoch 3"] || got["worker a epoch 4"] || got["worker b epoch 1"] {
		t.Fatalf("worker a lost at epoch 3: ended %v", got)
	}
	s.endUnit(ctx, "b", 1, "main")
	if got := ended(); !got["worker b epoch 1"] || got["worker a epoch 4"] {
		t.Fatalf("b's unit fenced: ended %v", got)
	}
	for _, f := range release {
		f()
	}
	before := opened.Load()
	s.EndWorker(ctx, Worker{Name: "a", Epoch: 4})
	if n := opened.Load() - before; n != 0 || ended()["worker a epoch 4"] {
		t.Fatalf("units no longer in flight: a repository was opened (%d times) to end sessions", n)
	}
	var none *Sessions // a server without a fleet
	none.hold("a", 1, "main")()
	none.EndWorker(ctx, Worker{Name: "a", Epoch: 1})
}
