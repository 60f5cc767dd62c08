package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/servicetest"
)

// claimingFleet is a fleet whose workers reach connection "theirs"
// while claimed is set: its stand-in lists one VM, "on-a-worker".
type claimingFleet struct{ claimed atomic.Bool }

func (f *claimingFleet) RunOn(context.Context, string, string, any) (json.RawMessage, error) {
	return nil, errors.New("not asked")
}

func (f *claimingFleet) StandIn(_ context.Context, _ *policy.Config, name string) (hypervisor.Connector, bool, error) {
	if name != "theirs" || !f.claimed.Load() {
		return nil, false, nil
	}
	return standIn{}, true, nil
}

type standIn struct{ hypervisor.Connector }

func (standIn) Inventory(context.Context) ([]hypervisor.VM, error) {
	return []hypervisor.VM{{VMRef: hypervisor.VMRef{ID: "w1", Name: "on-a-worker"}}}, nil
}

func (standIn) CleanupLeftovers(context.Context) ([]hypervisor.Leftover, error) { return nil, nil }

// TestTheServerOpensNoConnectionOfTheWorkers: on a fleet's server, the
// engine's connection that a worker reaches is not opened, and each
// call goes where the connection is at that moment: to the fleet's
// stand-in while a worker reaches it, to the server's own connector
// (opened then, once) while none does. Operations opening a connection
// of their own (OpenConnectors: the inventory's refresher, a plan) get the
// stand-in too.
func TestTheServerOpensNoConnectionOfTheWorkers(t *testing.T) {
	e := newConfEnv(t, `
connections:
  - {name: theirs, kind: fake, options: {seed: 5, vms: 2, hosts: 1, datastores: 1, disk-size: 128KiB}}
policies:
  - {name: yearly, connection: theirs, schedule: "0 3 1 1 *"}
`)
	s, ctx := e.service(), e.ctx
	cfg, err := s.EngineConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fleet := &claimingFleet{}
	fleet.claimed.Store(true)
	defer s.SetRemote(fleet)()
	opened := func() int { return len(servicetest.Opened("theirs")) }

	cs := service.NewConnectorSet(s)
	conns, err := cs.Update(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := conns.Conns["theirs"]
	if c == nil || opened() != 0 || conns.Storage["theirs"] != nil {
		t.Fatalf("the workers' connection: %v, opened %d times, storage %v", c, opened(), conns.Storage["theirs"])
	}
	list := func(want string) {
		t.Helper()
		vms, err := c.Inventory(ctx)
		if err != nil || len(vms) == 0 || (vms[0].Name == "on-a-worker") != (want == "on-a-worker") {
			t.Fatalf("listed %+v, %v; want %s's", vms, err, want)
		}
		if left, err := c.CleanupLeftovers(ctx); len(left) != 0 || err != nil {
			t.Fatalf("cleanup: %v %v", left, err)
		}
	}
	list("on-a-worker")
	if one, err := s.OpenConnectors(ctx, cfg, []string{"theirs"}); err != nil || one.Conns["theirs"] != (standIn{}) || opened() != 0 {
		t.Fatalf("OpenConnectors of the workers' connection: %v, %v, opened %d times", one, err, opened())
	}

	fleet.claimed.Store(false) // the worker deregistered: the server's own
	list("the server's own connector")
	fleet.claimed.Store(true)
	list("on-a-worker")
	fleet.claimed.Store(false)
	list("the server's own connector")
	if opened() != 1 {
		t.Fatalf("the server's own connector was opened %d times, want once", opened())
	}
	cs.Close()
	if n := servicetest.Opened("theirs")[0].Counters().Closes; n != 1 {
		t.Fatalf("the server's own connector closed %d times", n)
	}
}
