// Command planfleet holds the planner (internal/plan) to real runs of a
// QEMU fleet: qemu-storage-daemon instances stand in for VMs (one qcow2
// disk each, with data of its own), protected through coffer's qemu
// connector by the job engine into a local repository or an S3 bucket
// (versitygw, started by the benchmark). Calibration runs of a few VMs at
// several concurrencies are the policy's history; then each run of the
// whole fleet is predicted from it before it starts, and joins it once
// done, as real runs join the catalog's (bench/planacc; -learn=false
// predicts every run from the calibration alone):
//
//	go run ./bench/planfleet                       # 48 VMs into a local repository
//	go run ./bench/planfleet -store s3             # the same fleet into versitygw
//
// By default the calibration is half the fleet, at 1, 4, 12 and 24 in
// flight, the highest concurrency of the fleet's runs: as the vSphere
// simulator's benchmark calibrates 300 of its 1,000 VMs at 8, 64 and 256
// for runs at 8, 32 and 256. Calibrated with 12 VMs at 1, 4 and 12, the
// runs at 24 were an extrapolation, and five of six on a quiet machine
// came out longer than their P50 (docs/benchmarks-planner.md).
//
// Every run is a full backup into a repository of its own (a new
// directory or a new prefix of the bucket), so that each run stores all
// its data: none is deduplicated against an earlier run. The disks'
// data compresses to about half. qemu-storage-daemon and qemu-img must be
// on PATH, and versitygw for -store s3 (scripts/ci/install-s3.sh puts it
// in .cache/bin).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/coffer-backup/coffer/bench/benchutil"
	"github.com/coffer-backup/coffer/bench/planacc"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/engine/enginetest"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/plan"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
)

func main() {
	vms := flag.Int("vms", 48, "qemu-storage-daemon instances (VMs)")
	datastores := flag.Int("datastores", 4, "directories the disks are spread over (the engine's datastores)")
	disk := flag.String("disk", "256MiB", "disk size per VM")
	data := flag.String("data", "128MiB", "bytes of data written into each disk")
	storeKind := flag.String("store", "local", "local (a directory) or s3 (versitygw)")
	work := flag.String("work", "", "work directory (default: a temporary one under /var/tmp, removed)")
	var po planacc.Options
	var levels, conc string
	flag.IntVar(&po.CalibrationVMs, "calibrate-vms", 24, "VMs in each calibration run")
	flag.StringVar(&levels, "calibrate", "1,4,12,24", "concurrencies of the calibration runs (up to the highest of the fleet's: beyond it the planner extrapolates)")
	flag.IntVar(&po.Repeats, "repeat", 2, "calibration runs at each of those concurrencies")
	flag.StringVar(&conc, "concurrency", "2,8,24", "concurrencies of the whole fleet's runs")
	flag.IntVar(&po.Runs, "runs", 3, "runs of the whole fleet at each concurrency")
	flag.StringVar(&po.RecordFile, "record", "", "file keeping the planner's record (measured ÷ P50 of each run) between invocations")
	flag.BoolVar(&po.Learn, "learn", true, "the fleet's runs join the policy's history, as the catalog's real runs do (false: every run predicted from the calibration alone)")
	flag.Parse()
	po.Levels, po.Concurrency, po.VMs, po.Policy = benchutil.Ints(levels), benchutil.Ints(conc), *vms, "bench"
	ctx := context.Background()
	if *work == "" {
		d, err := os.MkdirTemp("/var/tmp", "coffer-bench-planfleet-")
		benchutil.Check(err)
		benchutil.AtExit(func() { os.RemoveAll(d) })
		*work = d
	}
	start := time.Now()
	startDaemons(ctx, filepath.Join(*work, "vms"), *vms, *datastores, benchutil.Size(*disk), benchutil.Size(*data))
	conn, err := qemu.New(qemu.Config{Sockets: []string{filepath.Join(*work, "vms", "*.qmp")}, StateDir: filepath.Join(*work, "state"), Host: "kvm"})
	benchutil.Check(err)
	repos := newRepositories(ctx, *storeKind, filepath.Join(*work, "repos"))
	f := &qemuFleet{conn: conn, repos: repos, vms: *vms}
	fmt.Printf("fleet: %d qemu-storage-daemons on %d datastores, %s disks with %s of data each (half compressible); built in %s; repositories: %s\n\n",
		*vms, *datastores, *disk, *data, time.Since(start).Round(100*time.Millisecond), repos)
	planacc.Run(ctx, f, po)
	benchutil.Exit(0)
}

// qemuFleet runs the engine over the daemons (planacc.Fleet).
type qemuFleet struct {
	conn  *qemu.Connector
	repos *repositories
	vms   int
}

func (f *qemuFleet) config(c int) *policy.Config {
	return &policy.Config{Limits: policy.Limits{Tasks: c}}
}

// policy backs up the first n VMs in full.
func (f *qemuFleet) policy(n int) policy.Policy {
	p := policy.Policy{Name: "bench", Connection: "kvm", Mode: "full"}
	if n < f.vms {
		for i := range n {
			p.Select.Names = append(p.Select.Names, fmt.Sprintf("vm-%02d", i))
		}
	}
	return p
}

func (f *qemuFleet) Run(ctx context.Context, c, n int, cat *enginetest.Catalog) (time.Duration, string) {
	r := f.repos.next(ctx)
	eng, err := engine.New(ctx, engine.Options{Config: f.config(c), Catalog: cat,
		Connectors:     map[string]hypervisor.Connector{"kvm": f.conn},
		OpenRepository: func(context.Context, string) (*repo.Repository, error) { return r, nil }})
	benchutil.Check(err)
	defer eng.Close()
	start := time.Now()
	res, err := eng.Run(ctx, f.policy(n))
	took := time.Since(start)
	benchutil.Check(err)
	if res.Job.TasksOK != n {
		for _, t := range res.Failed() {
			log.Printf("%s failed: %s", t.VMName, t.Error)
		}
		benchutil.Fatalf("run at %d: %d of %d VMs backed up", c, res.Job.TasksOK, n)
	}
	var read int64
	for _, t := range res.Tasks {
		read += t.BytesRead
	}
	return took, fmt.Sprintf("%.0f MB read", float64(read)/1e6)
}

func (f *qemuFleet) Input(ctx context.Context, c int, hist *plan.History) (plan.Input, []string) {
	vms, err := f.conn.Inventory(ctx)
	benchutil.Check(err)
	p := f.policy(f.vms)
	return plan.BuildInput(plan.Sources{Config: f.config(c), Policy: p, Targets: plan.Selected(p, "kvm", vms), History: hist})
}
