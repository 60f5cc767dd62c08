package fleet

import (
	"context"
	"errors"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// changingRegistry is a registry whose workers the test changes.
type changingRegistry struct {
	catalog.Workers
	ws *[]catalog.Worker
}

func (r changingRegistry) ListWorkers(context.Context) ([]catalog.Worker, error) { return *r.ws, nil }

// ownConnector is the server's own connector: it counts the calls it
// takes and its closes.
type ownConnector struct {
	hypervisor.Connector
	calls, closes int
}

func (c *ownConnector) CleanupLeftovers(context.Context) ([]hypervisor.Leftover, error) {
	c.calls++
	return []hypervisor.Leftover{{Name: "the server's"}}, nil
}

func (c *ownConnector) Snapshot(context.Context, hypervisor.VMRef, hypervisor.SnapshotRequest) (hypervisor.Session, error) {
	return nil, errors.New("the server's snapshot")
}

func (c *ownConnector) Close() error { c.closes++; return nil }

// TestFollowedGoesWhereTheConnectionIs: the engine's connector of a
// fleet's server takes each call where the connection is at that moment:
// to the stand-in while a registered worker, not lost, reaches it (which
// cleans nothing and refuses snapshots), to the server's own connector
// otherwise, opened at the first such call and then kept until Close.
func TestFollowedGoesWhereTheConnectionIs(t *testing.T) {
	ctx := context.Background()
	worker := catalog.Worker{Name: "kvm1", State: catalog.WorkerReady,
		Reach: catalog.WorkerReach{Connections: []string{"kvm1"}, Hosts: []string{"kvm1/kvm1"}}}
	ws := []catalog.Worker{worker}
	own := &ownConnector{}
	opens := 0
	c := Remote{Workers: changingRegistry{ws: &ws}}.Follow(standInConfig, "kvm1", nil, func(context.Context) (hypervisor.Connector, error) {
		opens++
		return own, nil
	})
	whose := func(want string) {
		t.Helper()
		left, err := c.CleanupLeftovers(ctx)
		_, serr := c.Snapshot(ctx, hypervisor.VMRef{Name: "web-1"}, hypervisor.SnapshotRequest{})
		theirs := len(left) == 0 && err == nil && errors.Is(serr, hypervisor.ErrUnsupported)
		if theirs != (want == "the workers'") {
			t.Fatalf("want %s: cleanup %v %v, snapshot %v", want, left, err, serr)
		}
	}
	if c.Kind() != "qemu" {
		t.Errorf("kind %q", c.Kind())
	}
	whose("the workers'")
	if opens != 0 {
		t.Fatalf("the workers' connection was opened %d times", opens)
	}
	worker.State = catalog.WorkerLost
	ws = []catalog.Worker{worker}
	whose("the server's")
	ws = nil // deregistered
	whose("the server's")
	worker.State = catalog.WorkerDraining
	ws = []catalog.Worker{worker}
	whose("the workers'")
	if opens != 1 || own.calls != 2 {
		t.Fatalf("the server's own connector was opened %d times and took %d cleanups, want 1 and 2", opens, own.calls)
	}
	if err := c.(interface{ Close(context.Context) error }).Close(ctx); err != nil || own.closes != 1 {
		t.Fatalf("close: %v, own closed %d times", err, own.closes)
	}
}
