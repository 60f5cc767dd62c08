// Command engine benchmarks the job engine against the in-memory fake
// hypervisor, in scaled time: every modelled hypervisor latency is divided
// by -scale, and measured wall-clock times are multiplied back, so an hour
// of snapshot operations runs in a second or two.
//
//	go run ./bench/engine                       # the published reference point
//	go run ./bench/engine -scenario issue       # 10,000 VMs, 1 s create and remove, vs the ideal
//	go run ./bench/engine -scenario overhead    # engine cost per VM, zero latency
//
// Scenarios:
//
//   - reference: 1000 VMs on 5 hosts and 100 datastores, snapshot create
//     5-15 s and remove 5-20 s, default limits (8 per datastore). The
//     hypervisor's management plane saturates: each operation on a host
//     is slowed by -contention per other operation in flight on that host.
//     The default coefficient is calibrated so that 256 concurrent tasks
//     take the published 36 minutes; the shape of the curve (linear at 1,
//     flattening at 32-64) then follows from it. At concurrency 1 the
//     ideal is the sum of the modelled operation times.
//   - issue: 10,000 VMs on 50 hosts and 500 datastores, 1 s create and 1 s
//     remove, no contention; the elapsed time is compared with the ideal
//     the limits allow: ceil(VMs / min(concurrency, 8 x datastores)) x 2 s.
//     Concurrency 1 and 8 would take 400 and 50 s of real time at this
//     scale; pass -concurrency 1,8,32,64,256 to include them.
//   - overhead: 10,000 VMs with zero latency, as fast as the engine goes:
//     its own cost per VM (dispatch, task records, events), with a no-op
//     backup and with real backups of empty disks into a local repository.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/engine/enginetest"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/store/local"
)

type scenario struct {
	vms, hosts, datastores int
	create, remove         fake.Latency
	contention             float64
	scale                  float64
	concurrency            []int
	runner                 string
}

func main() {
	name := flag.String("scenario", "reference", "reference, issue or overhead")
	scale := flag.Float64("scale", 0, "modelled seconds per real second (default per scenario)")
	contention := flag.Float64("contention", -1, "slow-down per other operation in flight on the same host (default per scenario)")
	conc := flag.String("concurrency", "", "comma-separated concurrency levels (default per scenario)")
	runner := flag.String("runner", "", "snapshot (snapshot create+remove only) or repo (real backups of empty disks)")
	flag.Parse()
	sc := scenarios[*name]
	if sc.vms == 0 {
		log.Fatalf("unknown scenario %q", *name)
	}
	if *scale > 0 {
		sc.scale = *scale
	}
	if *contention >= 0 {
		sc.contention = *contention
	}
	if *runner != "" {
		sc.runner = *runner
	}
	if *conc != "" {
		sc.concurrency = nil
		for _, f := range strings.Split(*conc, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				log.Fatalf("bad concurrency %q", f)
			}
			sc.concurrency = append(sc.concurrency, n)
		}
	}
	if *name == "overhead" {
		overhead(sc)
		return
	}
	curve(*name, sc)
}

var scenarios = map[string]scenario{
	"reference": {vms: 1000, hosts: 5, datastores: 100, scale: 1000, contention: 0.4, runner: "snapshot",
		create: fake.Latency{Min: 5 * time.Second, Max: 15 * time.Second}, remove: fake.Latency{Min: 5 * time.Second, Max: 20 * time.Second},
		concurrency: []int{1, 8, 32, 64, 128, 256}},
	"issue": {vms: 10000, hosts: 50, datastores: 500, scale: 50, runner: "snapshot",
		create: fake.Latency{Min: time.Second, Max: time.Second}, remove: fake.Latency{Min: time.Second, Max: time.Second},
		concurrency: []int{32, 64, 256}},
	"overhead": {vms: 10000, hosts: 50, datastores: 500, scale: 1, concurrency: []int{256}},
}

// curve runs the scenario at every concurrency and prints modelled times.
func curve(name string, sc scenario) {
	fmt.Printf("scenario %s: %d VMs, %d hosts, %d datastores, create %s-%s, remove %s-%s, contention %.3f, time scale 1:%g, runner %s, timer overshoot %s\n\n",
		name, sc.vms, sc.hosts, sc.datastores, sc.create.Min, sc.create.Max, sc.remove.Min, sc.remove.Max, sc.contention, sc.scale, sc.runner, overshoot)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "concurrency\treal\tmodelled\tper VM\tspeed-up\tideal\tvs ideal\tpeak in flight\tcatalog writes\t")
	// ideal: at concurrency 1, the sum of the modelled operation times
	// (what a perfect serial run takes); without contention, the bound
	// the limits allow.
	var base time.Duration
	for _, c := range sc.concurrency {
		real, peak, writes, opTime := runOnce(sc, c)
		modelled := time.Duration(float64(real) * sc.scale)
		if base == 0 {
			base = modelled * time.Duration(c)
		}
		ideal, vs := "-", "-"
		if c == 1 {
			ideal, vs = round(opTime), fmt.Sprintf("%+.1f%%", 100*(float64(modelled)/float64(opTime)-1))
		} else if sc.contention == 0 && sc.create.Min == sc.create.Max && sc.remove.Min == sc.remove.Max {
			slots := min(c, 8*sc.datastores)
			id := time.Duration(math.Ceil(float64(sc.vms)/float64(slots))) * (sc.create.Min + sc.remove.Min)
			ideal, vs = round(id), fmt.Sprintf("%+.1f%%", 100*(float64(modelled)/float64(id)-1))
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%.1fx\t%s\t%s\t%d\t%d\t\n", c, real.Round(time.Millisecond), round(modelled),
			round(modelled/time.Duration(sc.vms)), float64(base)/float64(modelled)/float64(sc.concurrency[0]), ideal, vs, peak, writes)
	}
	tw.Flush()
}

func round(d time.Duration) string {
	switch {
	case d >= time.Hour:
		return fmt.Sprintf("%.2fh", d.Hours())
	case d >= time.Minute:
		return fmt.Sprintf("%.1fmin", d.Minutes())
	case d >= time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	return d.Round(time.Microsecond).String()
}

// runOnce runs one job of every VM at concurrency c and returns the wall
// time, the peak number of VMs in flight and the catalog write calls.
func runOnce(sc scenario, c int) (time.Duration, int, int, time.Duration) {
	ctx := context.Background()
	f := fake.New(fake.Options{Seed: 1, VMs: sc.vms, Hosts: sc.hosts, Datastores: sc.datastores, DiskSize: 64 << 10, Allocated: -1,
		SnapshotCreate: sc.create, SnapshotRemove: sc.remove, Contention: sc.contention,
		Sleep: func(ctx context.Context, d time.Duration) error {
			return sleep(ctx, time.Duration(float64(d)/sc.scale))
		}})
	cat := enginetest.NewCatalog()
	cfg := &policy.Config{Limits: policy.Limits{Tasks: c}}
	o := engine.Options{Config: cfg, Catalog: cat, Connectors: map[string]hypervisor.Connector{"sim": f}, Workers: 1}
	var cleanup func()
	switch sc.runner {
	case "repo":
		r, done := tempRepo()
		cleanup = done
		o.OpenRepository = func(context.Context, string) (*repo.Repository, error) { return r, nil }
	default:
		o.Runner = snapshotOnly
	}
	eng, err := engine.New(ctx, o)
	if err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	res, err := eng.Run(ctx, policy.Policy{Name: "bench", Connection: "sim"})
	took := time.Since(start)
	if err != nil || res.Job.TasksOK != sc.vms {
		log.Fatalf("run at %d: %v %+v", c, err, res.Job)
	}
	eng.Close()
	if cleanup != nil {
		cleanup()
	}
	return took, f.Peaks().Total, cat.Writes, f.Counters().OpTime
}

// snapshotOnly protects a VM with a snapshot and releases it, like the
// reference measurement (snapshot operations only, no data read).
func snapshotOnly(ctx context.Context, _ *repo.Writer, conn hypervisor.Connector, req backup.VMRequest, _ backup.Options) (*repo.Point, error) {
	s, err := conn.Snapshot(ctx, req.VM, hypervisor.SnapshotRequest{SessionID: req.VM.ID, Mode: req.SnapshotMode})
	if err != nil {
		return nil, err
	}
	if _, err := s.Close(context.WithoutCancel(ctx), true); err != nil {
		return nil, err
	}
	return &repo.Point{Mode: "full"}, nil
}

func overhead(sc scenario) {
	fmt.Printf("engine overhead: %d VMs, %d hosts, %d datastores, zero hypervisor latency\n\n", sc.vms, sc.hosts, sc.datastores)
	for _, runner := range []string{"snapshot", "repo"} {
		sc.runner = runner
		c := sc.concurrency[0]
		real, _, writes, _ := runOnce(sc, c)
		fmt.Printf("runner %-8s concurrency %d: %s for %d VMs = %s per VM, %d catalog write calls\n", runner, c,
			real.Round(time.Millisecond), sc.vms, (real / time.Duration(sc.vms)).Round(time.Microsecond), writes)
	}
}

func tempRepo() (*repo.Repository, func()) {
	dir, err := os.MkdirTemp("", "coffer-bench-engine-")
	if err != nil {
		log.Fatal(err)
	}
	st, err := local.Create(filepath.Join(dir, "repo"))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	kdf := &crypto.KDF{Algorithm: "argon2id", Time: 1, MemoryKiB: 8 << 10, Threads: 1, Salt: []byte("0123456789abcdef")}
	if _, err := repo.Init(ctx, st, repo.InitOptions{Password: []byte("bench"), KDF: kdf}); err != nil {
		log.Fatal(err)
	}
	r, err := repo.Open(ctx, st, []byte("bench"), repo.Options{})
	if err != nil {
		log.Fatal(err)
	}
	return r, func() { st.Close(); os.RemoveAll(dir) }
}

// overshoot is how much later than asked a timer fires on this machine
// (measured once); sleeps are shortened by it so that thousands of short
// scaled sleeps do not add up to a systematic error.
var overshoot = func() time.Duration {
	const n, d = 50, 2 * time.Millisecond
	start := time.Now()
	for range n {
		time.Sleep(d)
	}
	return max((time.Since(start)-n*d)/n, 0)
}()

func sleep(ctx context.Context, d time.Duration) error {
	d -= overshoot
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
