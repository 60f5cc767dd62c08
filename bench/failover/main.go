// Command failover measures failover against a full restore, in one run:
// test guests that write self-verifying blocks (64 MiB disks) are backed
// up and replicated to standbys; then
//
//   - one VM: a planned failover onto its final point, timed until the
//     guest's own disk check passes at the DR site ("COFFER CHECK OK"),
//     against a full restore of the same point from the repository into
//     a raw image, then the same guest booted on it until the same check;
//
//   - a plan of the other -vms - 1 VMs in one group: each failed over, timed until the
//     last guest's check passed, against a full restore of the same VMs'
//     points, all at once, each booted until the same check;
//
//   - the failback of the one VM: bytes written back against the bytes
//     its DR overlay holds (what the DR VM wrote).
//
//     go run ./bench/failover            # one VM, then a plan of 3
//     go run ./bench/failover -vms 6     # one VM, then a plan of 5
//     go run ./bench/failover -vms 11    # one VM, then the plan of ten
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/failover"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/qmp"
	"github.com/coffer-backup/coffer/internal/replica"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/store/local"
)

func main() {
	n := flag.Int("vms", 4, "guests: the first for the one-VM figures and the failback, the others the plan")
	dir := flag.String("dir", "/tmp/coffer-bench-failover", "work directory (short: QEMU's socket paths)")
	flag.Parse()
	log.SetFlags(0)
	ctx := context.Background()
	_ = os.RemoveAll(*dir)
	must(os.MkdirAll(*dir, 0o755))
	img, err := guestvm.Build(ctx)
	must(err)
	b := &bench{dir: *dir, img: img, r: newRepo(ctx, filepath.Join(*dir, "repo")), final: map[string]string{}, points: map[string]*repo.Point{}}
	b.startSources(ctx, *n)
	defer func() {
		for _, vm := range b.vms {
			vm.Kill()
		}
	}()
	b.replicateFinal(ctx)
	one, full := b.oneVM(ctx)
	fb := b.failback(ctx)
	planTime, starts := b.plan(ctx)
	planRestore := b.restoreAll(ctx, b.fvms[1:])
	fmt.Printf("one VM (64 MiB disk): failover %s, full restore + boot %s (%.1fx)\n", one.Round(time.Millisecond), full.Round(time.Millisecond), full.Seconds()/one.Seconds())
	fmt.Printf("plan of %d VMs in one group: failover %s, full restore + boot of the same VMs at once %s (%.1fx)\n", len(b.fvms)-1,
		planTime.Round(time.Millisecond), planRestore.Round(time.Millisecond), planRestore.Seconds()/planTime.Seconds())
	fmt.Printf("  of which the starts (from the plan's start to its last failover step's end): %s\n", starts.Round(time.Millisecond))
	fmt.Printf("failback (%s): %d bytes written of a %d-byte disk in %s\n", fb.Mode, fb.BytesWritten, int64(64<<20), fb.Duration.Round(time.Millisecond))
}

// bench is the run's sources, repository and standbys.
type bench struct {
	dir     string
	img     *guestvm.Image
	r       *repo.Repository
	vms     []*guestvm.VM
	disks   []string
	conn    *qemu.Connector
	refs    map[string]hypervisor.VMRef
	fvms    []failover.VM
	final   map[string]string
	points  map[string]*repo.Point
	point0  *repo.Point
	started *failover.Started
}

// startSources boots n writing guests on 64 MiB raw disks.
func (b *bench) startSources(ctx context.Context, n int) {
	var socks []string
	for i := range n {
		disk := filepath.Join(b.dir, fmt.Sprintf("web-%d.raw", i))
		must(os.WriteFile(disk, nil, 0o644))
		must(os.Truncate(disk, 64<<20))
		vm, err := guestvm.Start(ctx, b.img, guestvm.Options{Name: fmt.Sprintf("web-%d", i), UUID: fmt.Sprintf("5d3c2b1a-0f9e-4d8c-b7a6-%012d", i),
			Dir: filepath.Join(b.dir, fmt.Sprintf("vm-%d", i)), Mode: "write", Base: 256, Interval: 20 * time.Millisecond,
			Disks: []guestvm.Disk{{ID: "vda", Path: disk, Format: "raw"}}})
		must(err)
		b.vms, socks, b.disks = append(b.vms, vm), append(socks, vm.QMPPath), append(b.disks, disk)
	}
	for _, vm := range b.vms {
		_, err := vm.WaitConsole(ctx, "COFFER READY")
		must(err)
	}
	var err error
	b.conn, err = qemu.New(qemu.Config{Sockets: socks, StateDir: filepath.Join(b.dir, "qemu-state")})
	must(err)
	inv, err := b.conn.Inventory(ctx)
	must(err)
	b.refs = map[string]hypervisor.VMRef{}
	for _, v := range inv {
		b.refs[v.Name] = v.VMRef
	}
}

// replicateFinal stops each source (a planned failover), backs it up and
// replicates that final point.
func (b *bench) replicateFinal(ctx context.Context) {
	for i, vm := range b.vms {
		name := fmt.Sprintf("web-%d", i)
		cl, err := qmp.Dial(ctx, vm.TestQMP)
		must(err)
		must(cl.Execute(ctx, "stop", nil, nil))
		w, err := b.r.NewWriter(ctx, "vm")
		must(err)
		p, err := backup.BackupVM(ctx, w, b.conn, backup.VMRequest{Connection: "bench", VM: b.refs[name], Mode: "full",
			SnapshotMode: hypervisor.CrashConsistent, Quiesce: hypervisor.QuiesceFallback}, backup.Options{})
		must(err)
		must(w.Close(ctx))
		_ = cl.Execute(ctx, "quit", nil, nil)
		<-vm.Exited()
		fv := failover.VM{Name: name, Dir: filepath.Join(b.dir, "dr", name)}
		_, err = replica.Run(ctx, b.r, p, replica.Options{Dir: fv.Dir})
		must(err)
		b.fvms, b.final[name], b.points[name] = append(b.fvms, fv), p.ID.String(), p
		if i == 0 {
			b.point0 = p
		}
	}
}

// oneVM times the failover of the first VM until its guest's check
// passed, and a full restore of the same point, booted until the same.
func (b *bench) oneVM(ctx context.Context) (time.Duration, time.Duration) {
	began := time.Now()
	st, err := failover.Planned(ctx, b.fvms[0], b.final["web-0"], failover.Options{})
	must(err)
	b.started = st
	waitCheck(ctx, filepath.Join(st.Dir, "console.log"))
	one := time.Since(began)
	began = time.Now()
	target := filepath.Join(b.dir, "restored.raw")
	_, err = restore.ToFile(ctx, b.r, b.point0, b.point0.Disks[0], target, restore.FileOptions{})
	must(err)
	rvm, err := guestvm.Start(ctx, b.img, guestvm.Options{Name: "restored", Dir: filepath.Join(b.dir, "restored"), Mode: "write", Base: 256,
		Disks: []guestvm.Disk{{ID: "vda", Path: target, Format: "raw"}}})
	must(err)
	_, err = rvm.WaitConsole(ctx, "COFFER CHECK OK")
	must(err)
	full := time.Since(began)
	rvm.Kill()
	return one, full
}

// failback lets the first VM's DR copy write, then fails it back.
func (b *bench) failback(ctx context.Context) *failover.FailbackResult {
	waitFor(ctx, filepath.Join(b.started.Dir, "console.log"), "COFFER WROTE 64")
	must(failover.StopFailedOver(ctx, b.fvms[0], 30*time.Second))
	fb, err := failover.Failback(ctx, b.fvms[0], map[string]string{"vda": b.disks[0]}, nil)
	must(err)
	return fb
}

// plan times the other VMs' failover in one group, until every guest's
// check passed, and the span of the VMs' failover steps within it.
func (b *bench) plan(ctx context.Context) (time.Duration, time.Duration) {
	plan := failover.Plan{Name: "bench", Groups: []failover.Group{{VMs: b.fvms[1:]}}}
	began := time.Now()
	rep, started, err := failover.RunPlan(ctx, plan, b.final, failover.Options{})
	must(err)
	var last time.Time
	for _, s := range rep.Steps {
		if end := s.Started.Add(s.Duration); s.Name == "failover" && end.After(last) {
			last = end
		}
	}
	starts := last.Sub(rep.Started)
	for _, s := range started {
		waitCheck(ctx, filepath.Join(s.Dir, "console.log"))
	}
	took := time.Since(began)
	for _, v := range b.fvms[1:] {
		_ = failover.StopFailedOver(ctx, v, 10*time.Second)
	}
	return took, starts
}

// restoreAll times a full restore of each VM's final point into a raw
// image, all at once, each booted until its guest's check passed: what a
// site without replicas would do for the plan's VMs.
func (b *bench) restoreAll(ctx context.Context, vms []failover.VM) time.Duration {
	began := time.Now()
	var wg sync.WaitGroup
	for _, v := range vms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := b.points[v.Name]
			target := filepath.Join(b.dir, "restored-"+v.Name+".raw")
			_, err := restore.ToFile(ctx, b.r, p, p.Disks[0], target, restore.FileOptions{})
			must(err)
			vm, err := guestvm.Start(ctx, b.img, guestvm.Options{Name: "restored-" + v.Name, Dir: filepath.Join(b.dir, "restored-"+v.Name),
				Mode: "write", Base: 256, Disks: []guestvm.Disk{{ID: "vda", Path: target, Format: "raw"}}})
			must(err)
			defer vm.Kill()
			_, err = vm.WaitConsole(ctx, "COFFER CHECK OK")
			must(err)
		}()
	}
	wg.Wait()
	return time.Since(began)
}

func newRepo(ctx context.Context, dir string) *repo.Repository {
	st, err := local.Create(dir)
	must(err)
	_, err = repo.Init(ctx, st, repo.InitOptions{Password: []byte("bench")})
	must(err)
	r, err := repo.Open(ctx, st, []byte("bench"), repo.Options{})
	must(err)
	return r
}

func waitCheck(ctx context.Context, console string) { waitFor(ctx, console, "COFFER CHECK OK") }

// waitFor polls a daemonized QEMU's console log for text.
func waitFor(ctx context.Context, path, text string) {
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), text) {
			return
		}
		if strings.Contains(string(b), "COFFER FAIL") {
			log.Fatalf("%s: %s", path, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
	log.Fatalf("no %q in %s", text, path)
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
