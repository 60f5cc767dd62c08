package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/servicetest"
)

// claimingFleet is a fleet whose workers reach connection "theirs" and
// not "ours"; it records what the set asks it to follow.
type claimingFleet struct {
	own  map[string]hypervisor.Connector
	open map[string]func(context.Context) (hypervisor.Connector, error)
}

func (f *claimingFleet) RunOn(context.Context, string, string, any) (json.RawMessage, error) {
	return nil, errors.New("not asked")
}

func (f *claimingFleet) StandIn(_ context.Context, _ *policy.Config, name string) (hypervisor.Connector, bool, error) {
	if name != "theirs" {
		return nil, false, nil
	}
	return standIn{}, true, nil
}

func (f *claimingFleet) Follow(_ *policy.Config, name string, own hypervisor.Connector,
	open func(context.Context) (hypervisor.Connector, error)) hypervisor.Connector {
	f.own[name], f.open[name] = own, open
	return followedBy{name: name}
}

type standIn struct{ hypervisor.Connector }

type followedBy struct {
	hypervisor.Connector
	name string
}

// TestTheServerOpensNoConnectionOfTheWorkers: on a fleet's server, the
// engine's connection that a worker reaches is not opened: the fleet
// follows it with nothing open, and an operation opening it for itself
// (OpenConnectors: the inventory's refresher, a plan) gets the stand-in.
// One no worker reaches is opened by the update, as without a fleet, and
// followed with the server's connector.
func TestTheServerOpensNoConnectionOfTheWorkers(t *testing.T) {
	e := newConfEnv(t, `
connections:
  - {name: theirs, kind: fake, options: {seed: 5, vms: 2, hosts: 1, datastores: 1, disk-size: 128KiB}}
  - {name: ours, kind: fake, options: {seed: 6, vms: 2, hosts: 1, datastores: 1, disk-size: 128KiB}}
policies:
  - {name: yearly, connections: [theirs, ours], schedule: "0 3 1 1 *"}
`)
	s, ctx := e.service(), e.ctx
	cfg, err := s.EngineConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fleet := &claimingFleet{own: map[string]hypervisor.Connector{}, open: map[string]func(context.Context) (hypervisor.Connector, error){}}
	defer s.SetRemote(fleet)()
	opened := func(name string) int { return len(servicetest.Opened(name)) }

	cs := service.NewConnectorSet(s)
	defer cs.Close()
	conns, err := cs.Update(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if conns.Conns["theirs"] != (followedBy{name: "theirs"}) || fleet.own["theirs"] != nil || opened("theirs") != 0 || conns.Storage["theirs"] != nil {
		t.Fatalf("the workers' connection: %v, own %v, opened %d times, storage %v", conns.Conns["theirs"], fleet.own["theirs"],
			opened("theirs"), conns.Storage["theirs"])
	}
	if one, err := s.OpenConnectors(ctx, cfg, []string{"theirs"}); err != nil || one.Conns["theirs"] != (standIn{}) || opened("theirs") != 0 {
		t.Fatalf("OpenConnectors of the workers' connection: %v, %v, opened %d times", one, err, opened("theirs"))
	}
	// Once no worker reaches it, the fleet opens the server's own.
	own, err := fleet.open["theirs"](ctx)
	if err != nil || own == nil || opened("theirs") != 1 {
		t.Fatalf("the server's own connector: %v, %v, opened %d times", own, err, opened("theirs"))
	}
	(&service.Connectors{Conns: map[string]hypervisor.Connector{"theirs": own}}).Close()

	if conns.Conns["ours"] != (followedBy{name: "ours"}) || fleet.own["ours"] == nil || opened("ours") != 1 || conns.Storage["ours"] == nil {
		t.Fatalf("the server's connection: %v, own %v, opened %d times, storage %v", conns.Conns["ours"], fleet.own["ours"],
			opened("ours"), conns.Storage["ours"])
	}
}
