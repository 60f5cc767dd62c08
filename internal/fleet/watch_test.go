package fleet_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/fleet"
)

// The watch declares lost the worker that stopped renewing, within the
// dead interval and a look, hands it to OnLost once, and leaves the live
// one alone.
//
// Its dead interval is three times the package's: the live worker must
// renew within half of it through the whole test, and one renewal's
// SQLite commit took over 500 ms in a CI run on a loaded machine.
func TestWatchDeclaresSilentWorkersLost(t *testing.T) {
	const dead = 3 * time.Second
	open := openCatalog(t)
	cfg := func(name string) fleet.Config {
		c := config(name)
		c.DeadAfter = dead
		return c
	}
	live, err := fleet.Join(context.Background(), fleet.Registry{Catalog: open()}, cfg("live"))
	if err != nil {
		t.Fatal(err)
	}
	done := run(live, func(ctx context.Context, drain <-chan struct{}) error { <-drain; return nil })
	silent, err := fleet.Join(context.Background(), fleet.Registry{Catalog: open()}, cfg("silent"))
	if err != nil {
		t.Fatal(err)
	}
	registered := silent.Worker().HeartbeatAt // it never runs, so it never renews

	lostCh := make(chan fleet.Worker, 10)
	ctx, stop := context.WithCancel(context.Background())
	watched := make(chan struct{})
	w := fleet.Watch{Catalog: open(), DeadAfter: dead, Every: dead / 10, OnLost: func(_ context.Context, lost []fleet.Worker) {
		for _, l := range lost {
			lostCh <- l
		}
	}}
	go func() { defer close(watched); w.Run(ctx) }()
	lost := await(t, "a worker lost", lostCh)
	if lost.Name != "silent" {
		t.Fatalf("declared lost: %+v", lost)
	}
	if after := time.Since(registered); after < dead || after > dead+dead/2 {
		t.Fatalf("declared lost %s after its last heartbeat, want %s and a look", after, dead)
	}
	// The live worker outlives another dead interval (two since it joined).
	select {
	case l := <-lostCh:
		t.Fatalf("declared lost too: %+v", l)
	case <-time.After(dead):
	}
	stop()
	<-watched
	if err := live.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := await(t, "live worker drained", done); err != nil {
		t.Fatal(err)
	}
}

// Two servers looking at once (a fake clock past the dead interval): each
// overdue worker goes to exactly one OnLost, and both see every worker
// lost; a look at a fleet with none overdue declares nothing.
func TestWatchesDeclareEachWorkerOnce(t *testing.T) {
	open := openCatalog(t)
	cat := open()
	t0 := time.Now().Add(-time.Hour)
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		if _, err := cat.RegisterWorker(context.Background(), fleet.Worker{Name: name, Protocol: fleet.Protocol, Slots: 1}, t0); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	handed := map[string]int{}
	observed := make([][]fleet.Worker, 2)
	watch := func(i int, now time.Time) fleet.Watch {
		return fleet.Watch{Catalog: open(), DeadAfter: dead, Now: func() time.Time { return now },
			OnLost: func(_ context.Context, lost []fleet.Worker) {
				mu.Lock()
				defer mu.Unlock()
				for _, l := range lost {
					handed[l.Name]++
				}
			},
			Observed: func(ws []fleet.Worker) { observed[i] = ws }}
	}
	if lost, err := watch(0, t0.Add(dead/2)).Check(context.Background()); err != nil || len(lost) != 0 {
		t.Fatalf("a look within the dead interval: %+v %v", lost, err)
	}
	var g errgroup.Group
	for i := range 2 {
		g.Go(func() error { _, err := watch(i, t0.Add(dead+time.Second)).Check(context.Background()); return err })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	if len(handed) != 5 {
		t.Fatalf("handed to OnLost: %v", handed)
	}
	for name, n := range handed {
		if n != 1 {
			t.Fatalf("worker %s handed to OnLost %d times", name, n)
		}
	}
	for i, ws := range observed {
		for _, w := range ws {
			if w.State != catalog.WorkerLost {
				t.Fatalf("watch %d observed %s %s", i, w.Name, w.State)
			}
		}
	}
}
