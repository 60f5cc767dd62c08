package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/guestvm"
)

// Production protection (issue 17): full backups of the running guest
// through the engine (`coffer run`), alternately without and with the
// latency-control section on the guest's datastore, with the guest's
// write workload running. Reported: the guest's write latency during
// each against its idle latency (target: within 2x with the throttle),
// and the throttled backup's time against the unthrottled one's (target:
// at most 1.5x).

// throttleOpts are the benchmark's latency-control settings.
type throttleOpts struct {
	rounds    int
	threshold time.Duration // 0: from the guest's idle latency as QEMU times it
	interval  string
	minRate   string
	cpuNice   int // -1: coffer's default
}

type throttleRun struct {
	throttled bool
	seconds   float64
	guest     lat
	engaged   int // task log lines: reads slowed
	lowest    float64
}

// qemuWriteLatency is vda's mean latency as QEMU's block accounting
// times it, over a number of the guest's latency windows (read through
// the test monitor, which coffer does not use).
func qemuWriteLatency(ctx context.Context, vm *guestvm.VM, windows int) time.Duration {
	adm := dialMonitor(ctx, vm.TestQMP)
	defer adm.Close()
	read := func() (uint64, int64) {
		var stats []struct {
			Qdev  string `json:"qdev"`
			Stats struct {
				WrOps  uint64 `json:"wr_operations"`
				WrTime int64  `json:"wr_total_time_ns"`
			} `json:"stats"`
		}
		within(ctx, monitorDeadline, "query-blockstats on the test monitor", func(ctx context.Context) error {
			return adm.Execute(ctx, "query-blockstats", nil, &stats)
		})
		for _, s := range stats {
			if strings.Contains(s.Qdev, "/vda/") {
				return s.Stats.WrOps, s.Stats.WrTime
			}
		}
		fatalf("query-blockstats: no vda")
		return 0, 0
	}
	ops0, ns0 := read()
	latencies(ctx, vm, windows)
	ops1, ns1 := read()
	if ops1 == ops0 {
		fatalf("the guest wrote nothing to vda")
	}
	return time.Duration((ns1 - ns0) / int64(ops1-ops0))
}

func throttleBench(ctx context.Context, vm *guestvm.VM, bin, dir string, env []string, idle lat, o throttleOpts) []throttleRun {
	switch {
	case o.threshold != 0:
	case storageSnapshot != "":
		// The target is the guest's latency within 2x of idle. Through
		// a storage snapshot the datastore's device is a source too,
		// and its latency is the guest's requests plus the backup's
		// reads: congested means production waits past the target.
		o.threshold = 2 * time.Duration(idle.avg) * time.Microsecond
	default:
		// QEMU times only the block layer's share of the guest's
		// latency, which is what the controller sees of it (the
		// fleecing runs' datastore is a tmpfs, without a device).
		o.threshold = qemuWriteLatency(ctx, vm, 8) * 2
	}
	conn := fullPolicy(vm)
	plain := filepath.Join(dir, "unthrottled.yaml")
	must(os.WriteFile(plain, []byte(conn), 0o644))
	throttled := filepath.Join(dir, "throttled.yaml")
	nice := ""
	if o.cpuNice >= 0 {
		nice = fmt.Sprintf(", cpu-nice: %d", o.cpuNice)
	}
	must(os.WriteFile(throttled, []byte(conn+fmt.Sprintf("latency-control:\n  - {datastores: [%q], threshold: %s, interval: %s, min-rate: %s%s}\n",
		dir, o.threshold, o.interval, o.minRate, nice)), 0o644))
	fmt.Fprintf(os.Stderr, "latency-control: threshold %s, interval %s, min-rate %s%s\n", o.threshold, o.interval, o.minRate, nice)
	var runs []throttleRun
	for i := 0; i < 2*o.rounds; i++ {
		cfg := plain
		if i%2 == 1 {
			cfg = throttled
		}
		r := fullUnder(ctx, vm, bin, dir, env, cfg, fmt.Sprint(i))
		r.throttled = i%2 == 1
		runs = append(runs, r)
	}
	return runs
}

// fullUnder takes one full backup of the running guest with the
// configuration file cfg, into a new repository (a full backup into one
// that holds the data already stores nothing and is much faster), and
// measures the guest's write latency meanwhile.
func fullUnder(ctx context.Context, vm *guestvm.VM, bin, dir string, env []string, cfg, name string) throttleRun {
	repo := filepath.Join(dir, "repo-throttle-"+name)
	if repoDir != "" {
		repo = filepath.Join(repoDir, "repo-throttle-"+name)
	}
	env = append(env, "COFFER_REPO="+repo, "COFFER_CONFIG="+cfg)
	runCoffer(ctx, bin, env, "init")
	latencies(ctx, vm, 2) // the guest settles after the previous run
	mark := vm.Mark()
	out, _ := runCoffer(ctx, bin, env, "run", "full", "--json")
	var r throttleRun
	r.guest = latencyFrom(vm, mark)
	r.seconds, r.engaged, r.lowest = jobFigures(ctx, bin, env, out)
	must(os.RemoveAll(repo))
	return r
}

// fullPolicy is the configuration of a full backup of the guest through
// the engine (policy "full"). With storageSnapshot, the policy protects the
// guest's datastore (the directory of its disks, which must be on XFS with
// reflink or btrfs) through a reflink storage snapshot: the guest is paused
// for the clone only and the backup reads the clone, so no copy-before-write
// sits in the guest's write path while it runs.
func fullPolicy(vm *guestvm.VM) string {
	conf := fmt.Sprintf("connections:\n  - {name: bench, kind: qemu, options: {sockets: [%q]}}\n", vm.QMPPath)
	if storageSnapshot == "" {
		return conf + "policies:\n  - {name: full, connection: bench, mode: full, change-check: -1}\n"
	}
	return conf + fmt.Sprintf("storage-snapshots:\n  - {name: bench-ds, kind: reflink, connections: [bench], datastores: [%q]}\n", storageSnapshot) +
		"policies:\n  - {name: full, connection: bench, mode: full, change-check: -1, group: datastore}\n"
}

// storageSnapshot is the datastore the -storage-snapshot flag names ("":
// fleecing overlays, the QEMU connector's default); repoDir is where the
// backups' repositories go then ("": the work directory).
var storageSnapshot, repoDir string

// jobFigures reads the job's duration from `coffer run --json` and its
// throttle lines from its log (`coffer job show --json`).
func jobFigures(ctx context.Context, bin string, env []string, out []byte) (seconds float64, engaged int, lowest float64) {
	var run struct {
		ID      int64   `json:"id"`
		Status  string  `json:"status"`
		Seconds float64 `json:"duration_seconds"`
	}
	if err := json.Unmarshal(out, &run); err != nil || run.Status != "success" {
		fatalf("coffer run: %v %s", err, out)
	}
	show, _ := runCoffer(ctx, bin, env, "job", "show", fmt.Sprint(run.ID), "--json")
	var job struct {
		Events []struct {
			Kind    string         `json:"kind"`
			Message string         `json:"message"`
			Fields  map[string]any `json:"fields"`
		} `json:"events"`
	}
	if err := json.Unmarshal(show, &job); err != nil {
		fatalf("coffer job show: %v %s", err, show)
	}
	for _, ev := range job.Events {
		if ev.Kind != "latency-throttle" {
			continue
		}
		if strings.HasPrefix(ev.Message, "reads slowed") {
			engaged++
		}
		if r, ok := ev.Fields["rate_bytes_per_second"].(float64); ok && r > 0 && (lowest == 0 || r < lowest) {
			lowest = r
		}
	}
	return run.Seconds, engaged, lowest
}

func printThrottle(idle lat, runs []throttleRun) {
	fmt.Printf("\nproduction protection: full backups through the engine, guest writing (idle avg %d us)\n", idle.avg)
	fmt.Printf("%-12s %9s %14s %14s %9s %16s\n", "", "seconds", "guest avg us", "x idle", "engaged", "lowest MiB/s")
	var sum [2]struct{ s, l float64 }
	n := 0
	for _, r := range runs {
		name := "unthrottled"
		k := 0
		if r.throttled {
			name, k = "throttled", 1
		}
		sum[k].s += r.seconds
		sum[k].l += float64(r.guest.avg)
		if k == 1 {
			n++
		}
		fmt.Printf("%-12s %9.1f %14d %13.2fx %9d %16.1f\n", name, r.seconds, r.guest.avg, float64(r.guest.avg)/float64(idle.avg), r.engaged, r.lowest/(1<<20))
	}
	if n == 0 {
		return
	}
	un, th := sum[0].s/float64(n), sum[1].s/float64(n)
	fmt.Printf("means: guest write latency unthrottled %.2fx idle, throttled %.2fx idle (target within 2x); backup time throttled/unthrottled %.2fx (target at most 1.5x)\n",
		sum[0].l/float64(n)/float64(idle.avg), sum[1].l/float64(n)/float64(idle.avg), th/un)
}
