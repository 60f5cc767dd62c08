// Package fleetscale measures a simulated fleet of 1,000 VMs backed up by
// one `coffer server` on PostgreSQL, first in its own process (today's
// engine, no workers), then on three `coffer worker` processes, in one
// run of the benchmark with the same configuration and the same server:
//
//	go test -run '^$' -bench FleetMakespan -benchtime 1x -timeout 60m ./bench/fleetscale/
//
// It reports the makespan of each and their ratio, the leader's CPU over
// the workers' run (utime+stime of the server process, /proc), the
// PostgreSQL statements per VM (pg_stat_statements, preloaded), and the
// planner's prediction (`coffer plan --what-if workers=NxSLOTS`) beside
// the measured makespan. The fleet is the test-only fake connector,
// which this binary registers (clitest.Main) and re-runs itself as
// coffer to serve. The results are in docs/benchmarks-fleet.md.
//
// COFFER_FLEET_VMS sets the fleet's size (default 1000);
// COFFER_BENCH_PROFILE=DIR writes the server's and each worker's CPU
// profile there: the server's over the measured in-process run
// (server.prof) and over the workers' run (leader.prof), the one server
// running every run (profile_test.go). COFFER_BENCH_SERVER_GOMAXPROCS=N
// runs the server (and only it) with GOMAXPROCS=N.
package fleetscale

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/bench/fleetserver"
	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
)

// TestMain lets the benchmark re-run its binary as coffer.
func TestMain(m *testing.M) {
	profileOnSignal()
	clitest.Main(m)
}

// workerSlots is each worker's slots: one per core of a 2-core host.
const workerSlots = 2

// fleetConfig is the simulated fleet: half of its VMs on a KVM-like
// connection (each VM on its host's worker), half on one that any worker
// runs, 3 hosts and 6 datastores each, under tight limits (the same as
// internal/cli/workercmd's TestLimitsAcrossWorkers). Every run is full,
// so that each reads the same bytes.
func fleetConfig(vms int, limits fleetLimits) string {
	return fmt.Sprintf(`
maintenance: {worker-dead-after: 30s}
limits: %s
resource-groups:
  - {name: ctrl-a, datastores: [ds-001, ds-002], limit: %d}
connections:
  - {name: kvm, kind: fake-kvm, options: {seed: 11, vms: %[3]d, hosts: 3, datastores: 6, disk-size: 128KiB, snapshot-create: 150ms}}
  - {name: sim, kind: fake, options: {seed: 12, vms: %[3]d, hosts: 3, datastores: 6, disk-size: 128KiB, snapshot-create: 150ms}}
policies:
  - {name: fleet, connections: [kvm, sim], mode: full, schedule: "0 3 1 1 *"}
`, limits.limits, limits.group, vms/2)
}

// fleetLimits are the configuration's limits and its controller group's.
type fleetLimits struct {
	limits string
	group  int
}

var (
	tightLimits = fleetLimits{"{tasks: 5, per-host: 2, per-datastore: 2, per-repository: 4}", 2}
	// looseLimits leave the workers' slots the only bound: the planner's
	// throughput scaling with more workers.
	looseLimits = fleetLimits{"{tasks: 1000, per-host: 1000, per-datastore: 1000, per-repository: 1000}", 1000}
)

func fleetVMs(b *testing.B) int {
	n := 1000
	if s := os.Getenv("COFFER_FLEET_VMS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 2 {
			b.Fatalf("COFFER_FLEET_VMS=%q: want a number of VMs", s)
		}
	}
	return n
}

// phase is what one run of the policy measured.
type phase struct {
	name      string
	job       api.Job
	wall      time.Duration
	leaderCPU float64 // seconds
	// monitorCPU is the part of leaderCPU that the Go runtime's system
	// monitor thread took (monitorThreadCPU): the CPU profile does not
	// sample it.
	monitorCPU float64
	pgCPU      float64
	stmts      statements
	// taskP50 is the median task as the leader recorded it (from its
	// grant to its end); unitP50 the median unit as the workers logged
	// it (from its start to its end there), 0 in the server.
	taskP50, unitP50 float64
	// taskMean and taskP99 are the leader's tasks': the repository's
	// streams are held for the mean, which a tail of late starts raises.
	taskMean, taskP99 float64
}

func BenchmarkFleetMakespan(b *testing.B) {
	vms := fleetVMs(b)
	dsn, postmaster := startPostgres(b)
	dir := b.TempDir()
	cfg := filepath.Join(dir, "coffer.yaml")
	env := []string{"COFFER_REPO=" + filepath.Join(dir, "repo"), "COFFER_PASSWORD=bench password", "COFFER_CATALOG=" + dsn,
		"COFFER_CONFIG=" + cfg, "COFFER_STATE_DIR=" + filepath.Join(dir, "state"), "COFFER_LOG_FORMAT=json"}
	writeFile(b, cfg, fleetConfig(vms, tightLimits))
	coffer(b, env, "init")
	prof := &profiling{dir: os.Getenv("COFFER_BENCH_PROFILE")}
	srvEnv := append(append(slices.Clone(env), asCoffer), prof.env()...)
	if n := os.Getenv("COFFER_BENCH_SERVER_GOMAXPROCS"); n != "" {
		srvEnv = append(srvEnv, "GOMAXPROCS="+n)
	}
	srv := fleetserver.Start(os.Args[0], srvEnv, "--log-level", "info")
	defer srv.Stop()
	token := strings.TrimSpace(coffer(b, env, "token", "create", "--user", "admin", "--grant", "/=Admin", "--lifetime", "1d"))

	for b.Loop() {
		// A first run in the server fills the repository and records the
		// costs the planner learns from; the measured ones follow.
		warm := measure(b, "in-process (warm-up)", srv, token, dsn, postmaster)
		local := prof.around(b, srv, func() phase { return measure(b, "in-process", srv, token, dsn, postmaster) })
		plans := plan(b, env, cfg, vms)
		var workers []*proc
		for i := 1; i <= 3; i++ {
			name := fmt.Sprintf("w%d", i)
			args := append([]string{"worker", "--name", name, "--slots", strconv.Itoa(workerSlots),
				"--reach-connections", "kvm,sim", "--reach-hosts", fmt.Sprintf("kvm/host-%02d", i), "--log-level", "info"},
				workerLogin(b, env, dir, dsn, name)...)
			if prof.dir != "" {
				args = append(args, "--cpu-profile", filepath.Join(prof.dir, fmt.Sprintf("w%d.prof", i)))
			}
			workers = append(workers, startProc(b, env, "worker registered", args...))
		}
		waitFor(b, "the engine given the workers", srv.Log, `"w1,w2,w3"`)
		fleet := prof.around(b, srv, func() phase { return measure(b, "3 workers", srv, token, dsn, postmaster) })
		fleet.unitP50 = median(unitSeconds(b, workers))
		report(b, vms, []phase{warm, local, fleet}, plans)
	}
}

// measure runs the policy once and what it cost.
func measure(b *testing.B, name string, srv *fleetserver.Server, token, dsn string, postmaster int) phase {
	b.Helper()
	resetStatements(b, dsn)
	cpu0, mon0, pg0 := cpuSeconds(b, srv.PID()), monitorThreadCPU(b, srv.PID()), postgresCPU(b, postmaster)
	j, wall := runPolicy(b, srv, token, "fleet")
	p := phase{name: name, job: j, wall: wall, leaderCPU: cpuSeconds(b, srv.PID()) - cpu0, pgCPU: postgresCPU(b, postmaster) - pg0,
		monitorCPU: monitorThreadCPU(b, srv.PID()) - mon0}
	p.stmts = readStatements(b, dsn)
	var tasks []float64
	for _, t := range j.Tasks {
		tasks = append(tasks, t.DurationSeconds)
	}
	p.taskP50, p.taskP99 = median(tasks), quantile(tasks, 0.99)
	for _, t := range tasks {
		p.taskMean += t / float64(len(tasks))
	}
	fmt.Printf("%-22s %d VMs in %.1f s (job %.1f s)\n", name, j.TasksOK, wall.Seconds(), j.DurationSeconds)
	return p
}

// planned is the planner's P50 for a scenario.
type planned map[string]float64

// whatIfs are the planner's scenarios: the measured run's workers, and
// how the fleet's makespan would scale with more of them.
var whatIfs = []string{"workers=1x2", "workers=2x2", "workers=3x2", "workers=6x2", "workers=12x2"}

// plan asks the planner (coffer plan, on the catalog's recorded runs)
// for the fleet's makespan under the configured limits and, for the
// scaling, under loose ones.
func plan(b *testing.B, env []string, cfg string, vms int) map[string]planned {
	b.Helper()
	out := map[string]planned{}
	loose := filepath.Join(filepath.Dir(cfg), "loose.yaml")
	writeFile(b, loose, fleetConfig(vms, looseLimits))
	for name, file := range map[string]string{"tight": cfg, "loose": loose} {
		args := []string{"plan", "fleet", "--json", "--runs", "20"}
		for _, w := range whatIfs {
			args = append(args, "--what-if", w)
		}
		var doc api.Plan
		raw := coffer(b, append(env, "COFFER_CONFIG="+file), args...)
		if err := json.Unmarshal([]byte(raw), &doc); err != nil {
			b.Fatalf("coffer plan: %v\n%s", err, raw)
		}
		out[name] = planned{}
		for _, sc := range doc.Scenarios {
			out[name][sc.Name] = sc.P50Seconds
			fmt.Printf("plan (%s limits) %-14s P50 %.1f s, P90 %.1f s, bottleneck %s\n", name, sc.Name, sc.P50Seconds, sc.P90Seconds, sc.Bottleneck)
		}
	}
	return out
}

func report(b *testing.B, vms int, phases []phase, plans map[string]planned) {
	for _, p := range phases {
		fmt.Printf("%-22s task mean %.3f s, P99 %.3f s; leader CPU in the Go runtime's system monitor %.2f s\n", p.name, p.taskMean, p.taskP99, p.monitorCPU)
		fmt.Printf("%-22s makespan %.1f s; task P50 %.3f s (on the worker %.3f s); leader CPU %.1f s (%.1f%% of a core); PostgreSQL CPU %.1f s; statements %d (%.1f per VM)\n",
			p.name, p.job.DurationSeconds, p.taskP50, p.unitP50, p.leaderCPU, 100*p.leaderCPU/p.wall.Seconds(), p.pgCPU, p.stmts.calls,
			float64(p.stmts.calls)/float64(vms))
		for _, t := range p.stmts.top {
			fmt.Println("    " + t)
		}
	}
	local, fleet := phases[1], phases[2]
	ratio := fleet.job.DurationSeconds / local.job.DurationSeconds
	predicted := plans["tight"]["workers=3x2"]
	fmt.Printf("makespan ratio (3 workers / in-process): %.2fx; planner P50 for workers=3x2 %.1f s against %.1f s measured (%.2fx)\n",
		ratio, predicted, fleet.job.DurationSeconds, fleet.job.DurationSeconds/predicted)
	b.ReportMetric(local.job.DurationSeconds, "inprocess-s")
	b.ReportMetric(fleet.job.DurationSeconds, "workers-s")
	b.ReportMetric(ratio, "ratio")
	b.ReportMetric(100*fleet.leaderCPU/fleet.wall.Seconds(), "leader-cpu-%")
	b.ReportMetric(fleet.leaderCPU*1000/float64(vms), "leader-cpu-s/1000VMs")
	b.ReportMetric(float64(fleet.stmts.calls)/float64(vms), "pg-stmts/VM")
	b.ReportMetric(predicted, "planned-s")
}

func writeFile(b *testing.B, path, text string) {
	b.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		b.Fatal(err)
	}
}

// unitSeconds are the units' times the workers logged (internal/fleet
// RunVMUnit's "VM unit ends").
func unitSeconds(b *testing.B, workers []*proc) []float64 {
	b.Helper()
	var out []float64
	for _, w := range workers {
		for _, line := range strings.Split(w.Log(), "\n") {
			var l struct {
				Msg     string  `json:"msg"`
				Seconds float64 `json:"seconds"`
			}
			if strings.Contains(line, `"VM unit ends"`) && json.Unmarshal([]byte(line), &l) == nil {
				out = append(out, l.Seconds)
			}
		}
	}
	return out
}

func median(xs []float64) float64 { return quantile(xs, 0.5) }

func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[min(int(q*float64(len(xs))), len(xs)-1)]
}
