package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/fleet"
)

// The watch declares lost the worker that stopped renewing, within the
// dead interval and a look, hands it to OnLost once, and leaves the live
// one alone.
func TestWatchDeclaresSilentWorkersLost(t *testing.T) {
	open := openCatalog(t)
	live, err := fleet.Join(context.Background(), fleet.Registry{Catalog: open()}, config("live"))
	if err != nil {
		t.Fatal(err)
	}
	done := run(live, func(ctx context.Context, drain <-chan struct{}) error { <-drain; return nil })
	silent, err := fleet.Join(context.Background(), fleet.Registry{Catalog: open()}, config("silent"))
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
	if after := time.Since(registered); after < dead || after > dead+time.Second {
		t.Fatalf("declared lost %s after its last heartbeat, want %s and a look", after, dead)
	}
	// The live worker outlives a few more dead intervals.
	select {
	case l := <-lostCh:
		t.Fatalf("declared lost too: %+v", l)
	case <-time.After(3 * dead):
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
