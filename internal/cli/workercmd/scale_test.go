package workercmd_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// fleetScale is the size of the simulated fleet of TestLimitsAcrossWorkers.
type fleetScale struct {
	vms  int // per connection: one host-bound, one that any worker runs
	runs int
}

// scaleOf is the CI's scaled-down fleet, or the (1,000 VMs, 10
// runs) with COFFER_FLEET_SCALE=full.
func scaleOf() fleetScale {
	if os.Getenv("COFFER_FLEET_SCALE") == "full" {
		return fleetScale{vms: 500, runs: 10}
	}
	return fleetScale{vms: 40, runs: 3}
}

// The fleet's limits, tight against its three workers of two slots.
const (
	scaleTasks       = 5
	scalePerHost     = 2
	scalePerDS       = 2
	scalePerRepo     = 4
	scaleGroupLimit  = 2
	scaleWorkerSlots = 2
)

// scaleConfig is a fleet of two simulated connections, each of 3 hosts
// and 6 datastores: kvm (kind fake-kvm) is routed as QEMU is, each VM to
// the worker of its host; sim (kind fake) is routed by connection, so
// any worker runs its VMs. A controller group holds two datastores of
// both. A snapshot takes 150 ms, so that units overlap on every pool.
func scaleConfig(s fleetScale) string {
	return fmt.Sprintf(`
maintenance: {worker-dead-after: 10s}
limits: {tasks: %d, per-host: %d, per-datastore: %d, per-repository: %d}
resource-groups:
  - {name: ctrl-a, datastores: [ds-001, ds-002], limit: %d}
connections:
  - {name: kvm, kind: fake-kvm, options: {seed: 11, vms: %[6]d, hosts: 3, datastores: 6, disk-size: 128KiB, snapshot-create: 150ms}}
  - {name: sim, kind: fake, options: {seed: 12, vms: %[6]d, hosts: 3, datastores: 6, disk-size: 128KiB, snapshot-create: 150ms}}
policies:
  - {name: kvm, connection: kvm, schedule: "0 3 1 1 *"}
  - {name: sim, connection: sim, schedule: "0 3 1 1 *"}
`, scaleTasks, scalePerHost, scalePerDS, scalePerRepo, scaleGroupLimit, s.vms)
}

// scaleHome is the worker on each host of the kvm connection.
var scaleHome = map[string]string{"host-01": "w1", "host-02": "w2", "host-03": "w3"}

// TestLimitsAcrossWorkers runs a simulated fleet's policies on three
// `coffer worker` processes, led by one `coffer server` on PostgreSQL,
// under tight limits, several times. Each worker logs every unit's start
// and end (with its host and datastores); the sweep of the three logs
// gives every pool's peak, which never exceeds the pool's limit: the
// leader's dispatcher holds every limit for the whole fleet. Every VM has
// exactly one point per run; every host-bound unit ran on its host's
// worker, and the units any worker may run are spread within 1.5x
// between the (equal) workers.
func TestLimitsAcrossWorkers(t *testing.T) {
	s := scaleOf()
	began := time.Now()
	e := pgEnv(t, testutil.StartPostgres(t))
	e.Vars["COFFER_LOG_FORMAT"] = "json" // the sweep reads the logs' timestamps
	e.Config(scaleConfig(s))
	srv := e.StartServer()
	token := e.AdminToken()
	cat := openCatalog(t, e)
	workers := map[string]*clitest.ServerProc{}
	for host, name := range scaleHome {
		workers[name] = startScaleWorker(e, name, host)
	}
	waitLog(t, srv, "the engine given the three workers", "the engine places units on the workers", `"w1,w2,w3"`)
	t.Logf("fleet of %d VMs on %d workers ready in %s", 2*s.vms, len(workers), time.Since(began).Round(time.Millisecond))

	var jobs []api.Job
	for run := range s.runs {
		for _, policy := range []string{"kvm", "sim"} {
			start := time.Now()
			j := srv.RunPolicy(token, policy)
			if j.Status != "success" || j.TasksOK != s.vms {
				t.Fatalf("run %d of %s: %+v\n%s", run+1, policy, j, srv.Log())
			}
			t.Logf("run %d of %s: %d VMs in %s", run+1, policy, j.TasksOK, time.Since(start).Round(time.Millisecond))
			jobs = append(jobs, j)
		}
	}
	spans := sweepUnits(t, workers)
	checkAttempts(t, cat, jobs, spans)
	checkPeaks(t, spans)
	checkAffinity(t, spans)
	checkOnePointPerRun(t, cat, jobs, s)
	t.Logf("%d units swept; the whole test took %s", len(spans), time.Since(began).Round(time.Millisecond))
}

// startScaleWorker starts a worker reaching both connections and its
// host of the kvm one.
func startScaleWorker(e *clitest.Env, name, host string) *clitest.ServerProc {
	e.T.Helper()
	registered := func(s *clitest.ServerProc) bool { return strings.Contains(s.Stderr.String(), "worker registered") }
	return e.StartCoffer(registered, patience, append([]string{"worker", "--name", name, "--slots", fmt.Sprint(scaleWorkerSlots),
		"--reach-connections", "kvm,sim", "--reach-hosts", "kvm/" + host, "--heartbeat", "500ms", "--dead-after", "10s",
		"--log-level", "info"}, e.WorkerLogin(name)...)...)
}

// checkAttempts wants one swept unit per attempt the catalog records:
// every attempt ran on a worker, none in the server.
func checkAttempts(t *testing.T, cat catalog.Catalog, jobs []api.Job, spans []unitSpan) {
	t.Helper()
	perJob := map[int64]int{}
	for _, sp := range spans {
		perJob[sp.Job]++
	}
	for _, j := range jobs {
		tasks, err := cat.ListTasks(context.Background(), catalog.TaskFilter{JobID: j.ID})
		if err != nil {
			t.Fatal(err)
		}
		attempts := 0
		for _, task := range tasks {
			attempts += task.Attempts
		}
		if perJob[j.ID] != attempts {
			t.Errorf("job %d (%s): %d attempts recorded, %d units logged by the workers", j.ID, j.Policy, attempts, perJob[j.ID])
		}
	}
}

// checkPeaks wants every pool's peak, swept from the workers' logs,
// within its limit.
func checkPeaks(t *testing.T, spans []unitSpan) {
	t.Helper()
	peaks := poolPeaks(spans)
	var report []string
	for _, p := range sortedPools(peaks) {
		limit := poolLimit(p)
		report = append(report, fmt.Sprintf("%s %d/%d", p, peaks[p], limit))
		if limit > 0 && peaks[p] > limit {
			t.Errorf("pool %s: %d units at once, limit %d", p, peaks[p], limit)
		}
	}
	t.Logf("peak/limit per pool: %s", strings.Join(report, ", "))
	if peaks["global"] < 2 {
		t.Errorf("the units never overlapped (global peak %d): the sweep proves nothing", peaks["global"])
	}
}

// poolLimit is the configured limit of a pool (scaleConfig), 0 for none.
func poolLimit(pool string) int {
	kind, _, _ := strings.Cut(pool, ":")
	return map[string]int{"global": scaleTasks, "worker": scaleWorkerSlots, "host": scalePerHost, "datastore": scalePerDS,
		"repo": scalePerRepo, "group": scaleGroupLimit}[kind]
}

// checkAffinity wants every kvm unit on its host's worker, and the sim
// units spread within 1.5x between the workers.
func checkAffinity(t *testing.T, spans []unitSpan) {
	t.Helper()
	bound, elsewhere, free := 0, 0, map[string]int{}
	for _, sp := range spans {
		switch sp.Connection {
		case "kvm":
			bound++
			if sp.Worker != scaleHome[sp.Host] {
				elsewhere++
				t.Errorf("kvm/%s on %s ran on %s, not on %s", sp.VM, sp.Host, sp.Worker, scaleHome[sp.Host])
			}
		case "sim":
			free[sp.Worker]++
		}
	}
	least, most := -1, 0
	for _, w := range scaleHome {
		n := free[w]
		most = max(most, n)
		if least < 0 || n < least {
			least = n
		}
	}
	t.Logf("host-bound units: %d, %d on another worker; units any worker runs, per worker: %v", bound, elsewhere, free)
	if bound == 0 || least == 0 || float64(most) > 1.5*float64(least) {
		t.Errorf("units any worker runs, per worker: %v (max/min must be within 1.5)", free)
	}
}

// checkOnePointPerRun wants, in the catalog, exactly one point of every
// VM of each run's connection made by that run.
func checkOnePointPerRun(t *testing.T, cat catalog.Catalog, jobs []api.Job, s fleetScale) {
	t.Helper()
	pts, err := cat.ListBackupPoints(context.Background(), catalog.BackupPointFilter{})
	if err != nil {
		t.Fatal(err)
	}
	perJob := map[int64]map[string]int{}
	for _, p := range pts {
		if perJob[p.JobID] == nil {
			perJob[p.JobID] = map[string]int{}
		}
		perJob[p.JobID][p.Connection+"/"+p.VMID]++
	}
	for _, j := range jobs {
		vms := perJob[j.ID]
		if len(vms) != s.vms {
			t.Errorf("job %d (%s): points of %d VMs, want %d", j.ID, j.Policy, len(vms), s.vms)
		}
		for vm, n := range vms {
			if n != 1 || !strings.HasPrefix(vm, j.Policy+"/") {
				t.Errorf("job %d (%s): %d points of %s", j.ID, j.Policy, n, vm)
			}
		}
	}
	if len(pts) != len(jobs)*s.vms {
		t.Errorf("%d points in the catalog after %d runs of %d VMs", len(pts), len(jobs), s.vms)
	}
}
