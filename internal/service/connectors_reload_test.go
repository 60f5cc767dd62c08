package service_test

import (
	"context"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
	"github.com/coffer-backup/coffer/internal/service/fleetops"
	"github.com/coffer-backup/coffer/internal/service/repoops"
	"github.com/coffer-backup/coffer/internal/service/servicetest"
)

// TestServerClosesTheConnectionsItDrops: a connection whose definition
// changes is opened again at the reload, and one no scheduled policy
// uses any more leaves the engine; jobs started before a reload may still
// use the old connector, so it is closed when the server stops, with the
// ones in use. Every connector opened for the connection (the server's,
// and those of one-off operations such as the inventory's) ends closed
// exactly once: no vCenter session or libvirt connection is left behind.
func TestServerClosesTheConnectionsItDrops(t *testing.T) {
	e := newConfEnv(t, "")
	e.poll = 20 * time.Millisecond
	server, other := e.service(), e.service()
	ctx := e.ctx
	if _, err := (repoops.Ops{Service: server}).InitWith(context.Background(), &api.InitRepositoryInput{}, repoops.InitOptions{Password: []byte("pw")}); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []struct {
		kind string
		spec map[string]any
	}{
		{"connection", spec(t, `{name: dropme, kind: fake, options: {seed: 1, vms: 2, hosts: 1, datastores: 1, disk-size: 128KiB}}`)},
		{"policy", spec(t, `{name: yearly, connection: dropme, schedule: "0 3 1 1 *"}`)},
	} {
		if _, err := servicetest.CreateObject(ctx, other, obj.kind, obj.spec); err != nil {
			t.Fatal(err)
		}
	}
	runCtx, stop := context.WithCancel(context.Background())
	run := &serverRun{stopped: make(chan struct{})}
	go func() {
		defer close(run.stopped)
		run.err = fleetops.Ops{Service: server}.RunSchedules(runCtx)
	}()
	defer func() { stop(); <-run.stopped }()

	serving := func() hypervisor.Connector {
		c, _ := server.ServingConnector("dropme")
		return c
	}
	var first, second hypervisor.Connector
	eventually(t, run, "the server opens the connection", func() bool { first = serving(); return first != nil })

	// The definition changes: a new connector; the old one stays open
	// for the jobs that started with it.
	if _, err := servicetest.UpdateObject(ctx, other, "connection", "dropme", spec(t, `{name: dropme, kind: fake, options: {seed: 2, vms: 2, hosts: 1, datastores: 1, disk-size: 128KiB}}`), 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, run, "the reload opens the changed connection", func() bool { second = serving(); return second != nil && second != first })
	if n := first.(*fake.Connector).Counters().Closes; n != 0 {
		t.Fatalf("the replaced connector was closed %d times while jobs started before the reload may use it", n)
	}

	// No scheduled policy uses it any more: it leaves the engine.
	if _, err := servicetest.DeleteObject(ctx, other, "policy", "yearly", 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, run, "the reload drops the unused connection", func() bool { return serving() == nil })

	stop()
	<-run.stopped
	if run.err != nil {
		t.Fatalf("the server stopped with %v", run.err)
	}
	opened := servicetest.Opened("dropme")
	if len(opened) < 2 {
		t.Fatalf("%d connectors opened for dropme, want the server's two at least", len(opened))
	}
	for i, c := range opened {
		if n := c.Counters().Closes; n != 1 {
			t.Errorf("connector %d of %d for dropme closed %d times, want once", i+1, len(opened), n)
		}
	}
}
