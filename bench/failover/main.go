// Command failover measures failover against a full restore, in one run:
// test guests that write self-verifying blocks (64 MiB disks) are backed
// up and replicated to standbys; then
//
//   - one VM: a planned failover onto its final point, timed until the
//     guest's own disk check passes at the DR site ("COFFER CHECK OK"),
//     against a full restore of the same point from the repository into
//     a raw image, then the same guest booted on it until the same check;
//   - a plan of the other -vms - 1 VMs in one group: each failed over, timed until the
//     last guest's check passed;
//   - the failback of the one VM: bytes written back against the bytes
//     its DR overlay holds (what the DR VM wrote).
//
//	go run ./bench/failover            # one VM, then a plan of 3
//	go run ./bench/failover -vms 6     # one VM, then a plan of 5
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
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
	r := newRepo(ctx, filepath.Join(*dir, "repo"))
	var vms []*guestvm.VM
	var socks, disks []string
	for i := range *n {
		disk := filepath.Join(*dir, fmt.Sprintf("web-%d.raw", i))
		must(os.WriteFile(disk, nil, 0o644))
		must(os.Truncate(disk, 64<<20))
		vm, err := guestvm.Start(ctx, img, guestvm.Options{Name: fmt.Sprintf("web-%d", i), UUID: fmt.Sprintf("5d3c2b1a-0f9e-4d8c-b7a6-95847362514%d", i),
			Dir: filepath.Join(*dir, fmt.Sprintf("vm-%d", i)), Mode: "write", Base: 256, Interval: 20 * time.Millisecond,
			Disks: []guestvm.Disk{{ID: "vda", Path: disk, Format: "raw"}}})
		must(err)
		defer vm.Kill()
		_, err = vm.WaitConsole(ctx, "COFFER READY")
		must(err)
		vms, socks, disks = append(vms, vm), append(socks, vm.QMPPath), append(disks, disk)
	}
	conn, err := qemu.New(qemu.Config{Sockets: socks, StateDir: filepath.Join(*dir, "qemu-state")})
	must(err)
	inv, err := conn.Inventory(ctx)
	must(err)
	refs := map[string]hypervisor.VMRef{}
	for _, v := range inv {
		refs[v.Name] = v.VMRef
	}
	// The sources stop (a planned failover), their final points replicated.
	var fvms []failover.VM
	final := map[string]string{}
	var point0 *repo.Point
	for i, vm := range vms {
		name := fmt.Sprintf("web-%d", i)
		cl, err := qmp.Dial(ctx, vm.TestQMP)
		must(err)
		must(cl.Execute(ctx, "stop", nil, nil))
		w, err := r.NewWriter(ctx, "vm")
		must(err)
		p, err := backup.BackupVM(ctx, w, conn, backup.VMRequest{Connection: "bench", VM: refs[name], Mode: "full",
			SnapshotMode: hypervisor.CrashConsistent, Quiesce: hypervisor.QuiesceFallback}, backup.Options{})
		must(err)
		must(w.Close(ctx))
		_ = cl.Execute(ctx, "quit", nil, nil)
		<-vm.Exited()
		fv := failover.VM{Name: name, Dir: filepath.Join(*dir, "dr", name)}
		_, err = replica.Run(ctx, r, p, replica.Options{Dir: fv.Dir})
		must(err)
		fvms, final[name] = append(fvms, fv), p.ID.String()
		if i == 0 {
			point0 = p
		}
	}
	// One VM: failover against a full restore of the same point.
	began := time.Now()
	st, err := failover.Planned(ctx, fvms[0], final["web-0"], failover.Options{})
	must(err)
	waitCheck(ctx, filepath.Join(st.Dir, "console.log"))
	one := time.Since(began)
	began = time.Now()
	target := filepath.Join(*dir, "restored.raw")
	_, err = restore.ToFile(ctx, r, point0, point0.Disks[0], target, restore.FileOptions{})
	must(err)
	rvm, err := guestvm.Start(ctx, img, guestvm.Options{Name: "restored", Dir: filepath.Join(*dir, "restored"), Mode: "write", Base: 256,
		Disks: []guestvm.Disk{{ID: "vda", Path: target, Format: "raw"}}})
	must(err)
	_, err = rvm.WaitConsole(ctx, "COFFER CHECK OK")
	must(err)
	full := time.Since(began)
	rvm.Kill()
	// Let the DR VM write, then fail back.
	waitFor(ctx, filepath.Join(st.Dir, "console.log"), "COFFER WROTE 64")
	must(failover.StopFailedOver(ctx, fvms[0], 30*time.Second))
	fb, err := failover.Failback(ctx, fvms[0], map[string]string{"vda": disks[0]}, nil)
	must(err)
	// The plan: the other VMs failed over in one group.
	plan := failover.Plan{Name: "bench", Groups: []failover.Group{{VMs: fvms[1:]}}}
	began = time.Now()
	_, started, err := failover.RunPlan(ctx, plan, final, failover.Options{})
	must(err)
	for _, s := range started {
		waitCheck(ctx, filepath.Join(s.Dir, "console.log"))
	}
	planTime := time.Since(began)
	for _, v := range fvms[1:] {
		_ = failover.StopFailedOver(ctx, v, 10*time.Second)
	}
	fmt.Printf("one VM (64 MiB disk): failover %s, full restore + boot %s (%.1fx)\n", one.Round(time.Millisecond), full.Round(time.Millisecond), full.Seconds()/one.Seconds())
	fmt.Printf("plan of %d VMs in one group: failover %s\n", len(fvms)-1, planTime.Round(time.Millisecond))
	fmt.Printf("failback (%s): %d bytes written of a %d-byte disk in %s\n", fb.Mode, fb.BytesWritten, int64(64<<20), fb.Duration.Round(time.Millisecond))
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
