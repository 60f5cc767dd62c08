package service_test

import (
	"context"
	"sync"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/service/backupops"
	"github.com/coffer-backup/coffer/internal/service/repoops"
	"github.com/coffer-backup/coffer/internal/service/servicetest"
)

// Runs started through the API of a server go through the server's
// engine and connectors: with limits {tasks: 1}, two policy runs started
// at once and a backup of one VM beside them never have two VMs in
// flight on the hypervisor, and every snapshot is taken through the
// server's connector. (The server opens the connections of scheduled policies; the
// schedules here are months away.)
func TestRunsStartedOnAServerShareItsLimits(t *testing.T) {
	e := newConfEnv(t, `connections:
  - {name: shared-lab, kind: fake, options: {seed: 5, vms: 4, hosts: 1, datastores: 1, disk-size: 128KiB, snapshot-create: 20ms}}
limits: {tasks: 1}
policies:
  - {name: a, connection: shared-lab, schedule: "0 3 1 1 *"}
  - {name: b, connection: shared-lab, schedule: "0 3 1 1 *"}
`)
	s := e.service()
	if _, err := (repoops.Ops{Service: s}).InitWith(context.Background(), &api.InitRepositoryInput{}, repoops.InitOptions{Password: []byte("pw")}); err != nil {
		t.Fatal(err)
	}
	before := len(servicetest.Opened("shared-lab"))
	run := runServer(t, s)
	eventually(t, run, "the server's engine", s.Serving)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, name := range []string{"a", "b"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := s.RunPolicy(e.ctx, name)
			if err == nil {
				_, err = r.Wait()
			}
			errs <- err
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := backupops.Ops{Service: s}.BackupVM(e.ctx, &api.BackupVMInput{Connection: "shared-lab", VM: "web-0000"})
		errs <- err
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// The server opens its engine's connector first; the inventory's
	// one-shot listings open others, which take no snapshot.
	conns := servicetest.Opened("shared-lab")[before:]
	for i, c := range conns[1:] {
		if n := c.Counters().Creates; n != 0 {
			t.Fatalf("connector %d beside the server's took %d snapshots", i+1, n)
		}
	}
	if c, p := conns[0].Counters(), conns[0].Peaks(); c.Creates != 9 || p.Total != 1 {
		t.Fatalf("the server's connector took %d snapshots (want 4+4+1) with %d VMs in flight at most (limit 1)", c.Creates, p.Total)
	}
}
