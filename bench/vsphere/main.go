// Command vsphere benchmarks the job engine protecting a vSphere fleet
// through the vSphere connector, against an in-process vCenter simulator
// (govmomi's vcsim) whose snapshot create and remove tasks each take a
// fixed time, in real time (no time scaling):
//
//	go run ./bench/vsphere                                   # the published experiment's shape
//	go run ./bench/vsphere -concurrency 64,256 -c1-vms ""     # only the fast levels
//	go run ./bench/vsphere -concurrency "" -c1-vms ""         # only the inventory listing
//	go run ./bench/vsphere -restore-disk 1GiB                # a VM restore: today's path against the ranged one (restore.go)
//	go run ./bench/vsphere -plan 200 -concurrency 8,32,256 -inventory-runs 0 -c1-vms ""  # the planner's predictions against the runs (plan.go)
//
// Before the backups, the connector's Inventory of the whole fleet is timed
// (best of -inventory-runs, after one warm-up listing that opens the
// connections): one container view and one paged property-collector call,
// whatever the VM count (TestInventoryAtScale checks the call count).
//
// The fleet is 1000 VMs on 5 hosts and 100 datastores (10 VMs each), each
// with a small disk holding data. Every VM is backed up for real (snapshot,
// read through the HTTPS datastore transport, written into a local
// repository, snapshot removed) by the engine with its per-datastore limit
// (8) and the given total concurrency. Concurrency 1 is measured on subsets
// (-c1-vms) to show it is linear in the VM count; its 1000-VM figure is
// extrapolated from the per-VM time, because it would take 17 minutes.
//
// The ideal a run can reach is the number of waves the limits allow times
// one create plus one remove: max(ceil(N / min(c, 8 x datastores)),
// ceil(VMs per datastore / 8)) x (create + remove).
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/vmware/govmomi/simulator"

	"github.com/coffer-backup/coffer/bench/benchutil"
	"github.com/coffer-backup/coffer/bench/planacc"
	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/engine/enginetest"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/store/local"
)

type options struct {
	vms, hosts, datastores, perDS int
	diskSize, data                int64
	create, remove                time.Duration
	poll                          time.Duration
	concurrency, c1               []int
	runner                        string
}

func main() {
	var o options
	var conc, c1, disk, data string
	flag.IntVar(&o.vms, "vms", 1000, "VMs in the fleet")
	flag.IntVar(&o.hosts, "hosts", 5, "ESXi hosts")
	flag.IntVar(&o.datastores, "datastores", 100, "datastores (VMs are spread evenly)")
	flag.IntVar(&o.perDS, "per-datastore", 8, "engine limit: VM tasks in flight per datastore")
	flag.StringVar(&disk, "disk", "1MiB", "disk size per VM")
	flag.StringVar(&data, "data", "256KiB", "bytes of data written into each disk")
	flag.DurationVar(&o.create, "create", 500*time.Millisecond, "snapshot create task duration")
	flag.DurationVar(&o.remove, "remove", 500*time.Millisecond, "snapshot remove task duration")
	flag.DurationVar(&o.poll, "poll", 50*time.Millisecond, "connector's shared task poll interval")
	flag.StringVar(&conc, "concurrency", "8,32,64,256", "total concurrency levels over the whole fleet")
	flag.StringVar(&c1, "c1-vms", "25,50", "fleet subsets measured at concurrency 1")
	flag.StringVar(&o.runner, "runner", "backup", "backup (real backups into a repository) or snapshot (snapshot create+remove only)")
	invRuns := flag.Int("inventory-runs", 3, "time the fleet's inventory this many times and report the best (0: skip)")
	prof := flag.String("cpuprofile", "", "write a CPU profile of the runs (not the fleet build) to this file")
	var po planacc.Options
	var levels string
	flag.IntVar(&po.CalibrationVMs, "plan", 0, "predict each run with internal/plan before running it, from calibration runs of this many VMs (0: no plan)")
	flag.StringVar(&levels, "plan-calibrate", "8,64", "with -plan: the concurrencies of the calibration runs")
	flag.IntVar(&po.Repeats, "plan-repeat", 2, "with -plan: calibration runs at each of those concurrencies (two or more give the run-to-run spread)")
	flag.IntVar(&po.Runs, "plan-runs", 1, "with -plan: runs of the whole fleet at each -concurrency, each predicted before it starts")
	flag.BoolVar(&po.Learn, "plan-learn", true, "with -plan: the fleet's runs join the policy's history, as the catalog's real runs do (false: every run predicted from the calibration alone)")
	flag.StringVar(&po.RecordFile, "plan-record", "", "with -plan: file keeping the planner's record (measured ÷ P50 of each run) between invocations")
	restoreDisk := flag.String("restore-disk", "", "instead of the fleet: restore a 2-disk VM with disks of this size through today's path and the ranged one (restore.go), e.g. 1GiB")
	flag.Parse()
	// vcsim logs every call of a method it lacks (QueryChangedDiskAreas,
	// once per backed-up VM here): keep the output readable.
	log.SetOutput(dropLines{w: os.Stderr, substr: "does not implement"})
	o.concurrency, o.c1 = benchutil.Ints(conc), benchutil.Ints(c1)
	po.Levels, po.VMs, po.Concurrency, po.Policy = benchutil.Ints(levels), o.vms, o.concurrency, "bench"
	o.diskSize, o.data = benchutil.Size(disk), benchutil.Size(data)
	ctx := context.Background()
	if *restoreDisk != "" {
		restoreBench(ctx, benchutil.Size(*restoreDisk))
		return
	}

	start := time.Now()
	f := newFleet(ctx, o)
	defer f.close()
	fmt.Printf("fleet: %d VMs, %d hosts, %d datastores, %s disks with %s of data each; built in %s\n",
		o.vms, o.hosts, o.datastores, disk, data, time.Since(start).Round(100*time.Millisecond))
	if *invRuns > 0 {
		n, best := f.timeInventory(ctx, *invRuns)
		fmt.Printf("inventory: %d VMs listed in %s (best of %d)\n", n, round(best), *invRuns)
	}
	if len(o.c1)+len(o.concurrency) == 0 {
		return
	}
	// Task-level delays, without holding the VM's lock while sleeping, so
	// inventory reads are not blocked by snapshots in flight (vcsim.md §5).
	// Set only now: building the fleet must not be slowed by them.
	simulator.TaskDelay.MethodDelay = map[string]int{
		"CreateSnapshotEx": int(o.create.Milliseconds()), "RemoveSnapshot": int(o.remove.Milliseconds()), "LockHandoff": 0}
	fmt.Printf("snapshot create %s, remove %s (vcsim task delay); engine limit %d per datastore; task poll %s; runner %s; %d cores\n\n",
		o.create, o.remove, o.perDS, o.poll, o.runner, numCPU())

	if *prof != "" {
		pf, err := os.Create(*prof)
		if err != nil {
			log.Fatal(err)
		}
		pprof.StartCPUProfile(pf)
		defer pprof.StopCPUProfile()
	}
	if po.CalibrationVMs > 0 {
		planacc.Run(ctx, planFleet{f}, po)
		return
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "concurrency\tVMs\telapsed\tper VM\tideal\tvs ideal\tspeed-up vs 1\tpeak in flight\tpeak per datastore\tmean snapshot\tmean release\tfailed\t")
	var perVM1 time.Duration
	for _, n := range o.c1 {
		r := f.run(ctx, 1, n)
		perVM1 = r.elapsed / time.Duration(n)
		r.print(tw, o, 0)
	}
	if perVM1 > 0 {
		fmt.Fprintf(tw, "1\t%d\t%s\t%s\t%s\t\t\t\t\t\t\t(extrapolated)\t\n", o.vms, round(perVM1*time.Duration(o.vms)),
			round(perVM1), round(ideal(o, 1, o.vms)))
	}
	for _, c := range o.concurrency {
		f.run(ctx, c, o.vms).print(tw, o, perVM1)
	}
	tw.Flush()
}

type result struct {
	c, n             int
	elapsed          time.Duration
	peak, peakDS     int
	failed, backedUp int
	create, release  time.Duration // mean Snapshot and Close call
}

func (r result) print(tw *tabwriter.Writer, o options, perVM1 time.Duration) {
	id := ideal(o, r.c, r.n)
	speed := "-"
	if perVM1 > 0 {
		speed = fmt.Sprintf("%.1fx", float64(perVM1)*float64(r.n)/float64(r.elapsed))
	}
	fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%.2fx\t%s\t%d\t%d\t%s\t%s\t%d\t\n", r.c, r.n, round(r.elapsed), round(r.elapsed/time.Duration(r.n)),
		round(id), float64(r.elapsed)/float64(id), speed, r.peak, r.peakDS, round(r.create), round(r.release), r.failed)
}

// ideal is the shortest time the limits allow (see the package comment).
func ideal(o options, c, n int) time.Duration {
	perDS := int(math.Ceil(float64(min(n, o.vms)) / float64(o.datastores)))
	if n < o.datastores {
		perDS = 1
	}
	waves := max(ceilDiv(n, min(c, o.perDS*o.datastores)), ceilDiv(perDS, o.perDS))
	return time.Duration(waves) * (o.create + o.remove)
}

// run backs up the first n VMs at concurrency c through the engine.
func (f *fleet) run(ctx context.Context, c, n int) result {
	return f.runRecorded(ctx, c, n, enginetest.NewCatalog())
}

// runRecorded is run, recording into cat.
func (f *fleet) runRecorded(ctx context.Context, c, n int, cat *enginetest.Catalog) result {
	r, done := tempRepo()
	defer done()
	counted := newCounting(f.conn)
	cfg := f.config(c)
	eo := engine.Options{Config: cfg, Catalog: cat,
		Connectors:     map[string]hypervisor.Connector{"vc": counted},
		OpenRepository: func(context.Context, string) (*repo.Repository, error) { return r, nil }, Workers: 1}
	if f.o.runner == "snapshot" {
		eo.Runner = snapshotOnly
	}
	eng, err := engine.New(ctx, eo)
	if err != nil {
		log.Fatal(err)
	}
	defer eng.Close()
	p := f.policy(n)
	start := time.Now()
	res, err := eng.Run(ctx, p)
	took := time.Since(start)
	if err != nil {
		log.Fatalf("run at %d: %v", c, err)
	}
	out := result{c: c, n: n, elapsed: took, backedUp: res.Job.TasksOK}
	for _, t := range res.Failed() {
		out.failed++
		if out.failed <= 3 {
			log.Printf("c=%d: %s failed: %s", c, t.VMName, t.Error)
		}
	}
	out.peak, out.peakDS = counted.peaks()
	out.create, out.release = counted.means()
	if out.peakDS > f.o.perDS || out.peak > c {
		log.Fatalf("limit exceeded at concurrency %d: %d in flight, %d on one datastore", c, out.peak, out.peakDS)
	}
	return out
}

func (f *fleet) config(c int) *policy.Config {
	return &policy.Config{Limits: policy.Limits{Tasks: c, PerDatastore: f.o.perDS}}
}

// policy backs up the first n VMs of the fleet.
func (f *fleet) policy(n int) policy.Policy {
	p := policy.Policy{Name: "bench", Connection: "vc", Mode: "full"}
	if n < f.o.vms {
		for i := range n {
			p.Select.Names = append(p.Select.Names, vmName(i))
		}
	}
	return p
}

// timeInventory lists the fleet once to open connections, then runs times
// more and returns the VM count and the fastest listing, so that other
// work on the same cores decides the figure as little as possible.
func (f *fleet) timeInventory(ctx context.Context, runs int) (int, time.Duration) {
	if _, err := f.conn.Inventory(ctx); err != nil {
		log.Fatal(err)
	}
	best := time.Duration(math.MaxInt64)
	n := 0
	for range runs {
		start := time.Now()
		vms, err := f.conn.Inventory(ctx)
		if err != nil {
			log.Fatal(err)
		}
		best, n = min(best, time.Since(start)), len(vms)
	}
	if n != f.o.vms {
		log.Fatalf("inventory listed %d VMs of %d", n, f.o.vms)
	}
	return n, best
}

// snapshotOnly takes and releases the snapshot without reading data: the
// orchestration alone, as in the published snapshot-storm measurement.
func snapshotOnly(ctx context.Context, _ *repo.Writer, conn hypervisor.Connector, req backup.VMRequest, _ backup.Options) (*repo.Point, error) {
	s, err := conn.Snapshot(ctx, req.VM, hypervisor.SnapshotRequest{SessionID: fmt.Sprintf("bench-%s-%d", req.VM.ID, time.Now().UnixNano()),
		Mode: req.SnapshotMode})
	if err != nil {
		return nil, err
	}
	if _, err := s.Close(context.WithoutCancel(ctx), true); err != nil {
		return nil, err
	}
	return &repo.Point{Mode: "full"}, nil
}

func vmName(i int) string { return fmt.Sprintf("vm-%04d", i) }

func tempRepo() (*repo.Repository, func()) {
	dir, err := os.MkdirTemp("", "coffer-bench-vsphere-")
	if err != nil {
		log.Fatal(err)
	}
	st, err := local.Create(filepath.Join(dir, "repo"))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	salt := make([]byte, 16)
	rand.Read(salt)
	kdf := &crypto.KDF{Algorithm: "argon2id", Time: 1, MemoryKiB: 8 << 10, Threads: 1, Salt: salt}
	if _, err := repo.Init(ctx, st, repo.InitOptions{Password: []byte("bench"), KDF: kdf}); err != nil {
		log.Fatal(err)
	}
	r, err := repo.Open(ctx, st, []byte("bench"), repo.Options{})
	if err != nil {
		log.Fatal(err)
	}
	return r, func() { st.Close(); os.RemoveAll(dir) }
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

func round(d time.Duration) string {
	switch {
	case d >= time.Minute:
		return fmt.Sprintf("%.1fmin", d.Minutes())
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
	return d.Round(time.Millisecond).String()
}

var _ = vsphere.DefaultTimeouts

// dropLines writes log lines except those containing substr.
type dropLines struct {
	w      io.Writer
	substr string
}

func (d dropLines) Write(p []byte) (int, error) {
	if strings.Contains(string(p), d.substr) {
		return len(p), nil
	}
	return d.w.Write(p)
}
