package workercmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestBootOnAWorker: with a worker started with --can-boot, a policy's
// verify-boot schedule boots the point on that worker, not in the server:
// the server records the verification's job (kind verify-boot, its VM, by
// the schedule), whose log names the worker, and the result shows with
// the point. (A short name: the boot's Unix sockets live under the test's
// directory, and a socket's path has at most 107 bytes.)
func TestBootOnAWorker(t *testing.T) {
	// Not the other tests' 200 ms heartbeat: this test is about where a
	// boot runs, and under load a worker that renews that often can miss
	// a renewal, fence itself and hand the schedule's next boots to the
	// server (a CI run at load 40 did).
	const beat, dead = time.Second, 10 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	e := pgEnv(t, testutil.StartPostgres(t))
	vm := clitest.StartBootGuest(ctx, t, e)
	e.Config(fmt.Sprintf(`
maintenance: {worker-dead-after: %s}
connections:
  - {name: kvm, kind: qemu, options: {sockets: [%q]}}
policies:
  - name: web
    connection: kvm
    verify-boot:
      schedule: "@every 1s"
      marker: %q
      probes: ["http:%d/=200"]
`, dead, vm.QMPPath, guestvm.BootMarker, guestvm.BootProbePort))
	e.Must("run", "web")
	vm.Kill()

	srv := e.StartServer()
	registered := func(s *clitest.ServerProc) bool { return strings.Contains(s.Stderr.String(), "worker registered") }
	e.StartCoffer(registered, patience, append([]string{"worker", "--name", "booter", "--slots", "1", "--can-boot",
		"--heartbeat", beat.String(), "--dead-after", dead.String(), "--log-level", "info"}, e.WorkerLogin("booter")...)...)
	cat := openCatalog(t, e)
	job := waitBootJob(ctx, t, cat, srv)
	evs, err := cat.ListEvents(ctx, catalog.EventFilter{JobID: job.ID})
	if err != nil {
		t.Fatal(err)
	}
	ranOn := false
	for _, ev := range evs {
		ranOn = ranOn || strings.Contains(ev.Message, "verify-boot runs on worker booter")
	}
	if !ranOn || job.VM != "web-1" || job.User != "@schedule" {
		t.Fatalf("the scheduled verification %+v (ran on booter: %v): %+v", job, ranOn, evs)
	}
	var points []api.BackupPoint
	if err := json.Unmarshal([]byte(e.Must("snapshots", "--json")), &points); err != nil || len(points) != 1 ||
		points[0].BootVerification == nil || !points[0].BootVerification.Passed {
		t.Fatalf("snapshots: %+v %v", points, err)
	}
}

// waitBootJob waits for a verify-boot job that succeeded after the worker
// registered (the first ones may have run in the server, before).
func waitBootJob(ctx context.Context, t *testing.T, cat catalog.Catalog, srv *clitest.ServerProc) catalog.Job {
	t.Helper()
	for {
		jobs, err := cat.ListJobs(ctx, catalog.JobFilter{Kind: "verify-boot", Status: catalog.StatusSuccess})
		if err != nil && ctx.Err() == nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			evs, _ := cat.ListEvents(ctx, catalog.EventFilter{JobID: j.ID})
			for _, ev := range evs {
				if strings.Contains(ev.Message, "runs on worker") {
					return j
				}
			}
		}
		select {
		case <-ctx.Done():
			all, _ := cat.ListJobs(context.Background(), catalog.JobFilter{Kind: "verify-boot"})
			t.Fatalf("no scheduled boot verification ran on the worker in time: %d succeeded of %+v\n%s", len(jobs), all, srv.Log())
		case <-time.After(200 * time.Millisecond): // a poll's pace, not a synchronisation
		}
	}
}
