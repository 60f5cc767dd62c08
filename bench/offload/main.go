// Command offload measures FlashCopy Manager's experiment (issue 17),
// scaled down to this machine: N writing guests (TCG) whose disks live in
// one directory of a loop-mounted XFS (reflink=1), backed up in full by
// the job engine, VM by VM and as a group, into one repository: a seed
// run stores the data, then -rounds rounds run both modes in alternating
// order, each from a cold page cache (see dropCaches):
//
//	go run ./bench/offload            # 4 guests
//	go run ./bench/offload -vms 20 -disk 512M -base 4096
//
// Per VM it reports the exposure: VM by VM, how long the VM ran under its
// fleecing snapshot (copy-before-write on every guest write), from the
// end of snapshot-create to the end of snapshot-remove; as a group, how
// long it was held still (stopped, frozen when quiesced) for the one
// reflink storage snapshot (the group-snapshot event's window); and the
// total job time of each mode. Needs root (mount), loop devices, QEMU.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"time"

	"github.com/coffer-backup/coffer/bench/benchutil"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/engine/enginetest"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/storagesnap"
	"github.com/coffer-backup/coffer/internal/store/local"
	"golang.org/x/sys/unix"
)

func main() {
	n := flag.Int("vms", 4, "guests on the datastore")
	size := flag.String("disk", "64M", "disk size of each guest")
	mode := flag.String("snapshot", "crash-consistent", "snapshot mode of both runs")
	base := flag.Int("base", 256, "64 KiB blocks each guest writes before the runs (its data: 256 is 16 MiB)")
	rounds := flag.Int("rounds", 2, "measured rounds; each runs both modes, in alternating order")
	cold := flag.Bool("cold", true, "drop the page cache before each run (needs root)")
	flag.Parse()
	diskBytes, err := policy.ParseByteRate(*size)
	benchutil.Check(err)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "coffer-bench-offload-")
	benchutil.Check(err)
	benchutil.AtExit(func() { os.RemoveAll(dir) })
	mnt := filepath.Join(dir, "mnt")
	img := filepath.Join(dir, "xfs.img")
	benchutil.Check(os.Mkdir(mnt, 0o755))
	f, err := os.Create(img)
	benchutil.Check(err)
	benchutil.Check(f.Truncate(int64(*n)*max(int64(diskBytes), 256<<20) + 512<<20)) // sparse
	f.Close()
	benchutil.Run("mkfs.xfs", "-q", "-m", "reflink=1", img)
	benchutil.Run("mount", "-o", "loop", img, mnt)
	benchutil.AtExit(func() { exec.Command("umount", mnt).Run() })
	ds := filepath.Join(mnt, "vms")
	benchutil.Check(os.Mkdir(ds, 0o755))

	gimg, err := guestvm.Build(ctx)
	benchutil.Check(err)
	var socks []string
	var vms []*guestvm.VM
	for i := range *n {
		name := fmt.Sprintf("vm-%02d", i)
		disk := filepath.Join(ds, name+".qcow2")
		benchutil.Run("qemu-img", "create", "-q", "-f", "qcow2", disk, *size)
		vm, err := guestvm.Start(ctx, gimg, guestvm.Options{Name: name, UUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
			Dir: filepath.Join(dir, name), Mode: "write", Base: *base, Interval: 20 * time.Millisecond, GuestAgent: true,
			Disks: []guestvm.Disk{{ID: "vda", Path: disk, Format: "qcow2"}}})
		benchutil.Check(err)
		benchutil.AtExit(vm.Kill)
		vms = append(vms, vm)
		socks = append(socks, vm.QMPPath)
	}
	for _, vm := range vms {
		_, err := vm.WaitConsole(ctx, "COFFER READY")
		benchutil.Check(err)
	}
	state := filepath.Join(dir, "state")
	conn, err := qemu.New(qemu.Config{Sockets: socks, StateDir: state, Connections: 2})
	benchutil.Check(err)
	st, err := local.Create(filepath.Join(dir, "repo"))
	benchutil.Check(err)
	_, err = repo.Init(ctx, st, repo.InitOptions{Password: []byte("pw"), KDF: repotest.FastKDF})
	benchutil.Check(err)
	r, err := repo.Open(ctx, st, []byte("pw"), repo.Options{})
	benchutil.Check(err)
	providers := policy.StorageSnapshots{{Name: "xfs", Kind: "reflink", Connections: []string{"lab"}, Datastores: []string{ds}}}
	cat := enginetest.NewCatalog()
	eng, err := engine.New(ctx, engine.Options{
		Config: &policy.Config{Limits: policy.Limits{Tasks: 2 * *n, PerDatastore: *n, PerHost: *n},
			Connections: []policy.Connection{{Name: "lab", Kind: "qemu"}}, StorageSnapshots: providers},
		Catalog: cat, Connectors: map[string]hypervisor.Connector{"lab": conn},
		StorageSnapshotters: storagesnap.For(providers, state, nil),
		OpenRepository:      func(context.Context, string) (*repo.Repository, error) { return r, nil },
		FlushInterval:       50 * time.Millisecond})
	benchutil.Check(err)
	benchutil.AtExit(func() { eng.Close() })
	defer benchutil.Exit(0)

	fmt.Printf("%d guests (TCG, writing every 20 ms), %s qcow2 disks holding %d MiB each, in one directory of an XFS (reflink=1) on a loop device; full backups, snapshot: %s\n",
		*n, *size, *base*guestvm.BlockSize>>20, *mode)
	fmt.Printf("a seed run (VM by VM, not reported) stores the data first, then %d rounds alternate the modes; cold page cache before each run: %v\n\n", *rounds, *cold)
	b := &bench{ctx: ctx, eng: eng, cat: cat, vms: *n, snapshot: *mode, cold: *cold}
	b.run("vm") // the seed: every measured run then stores the same (nothing new)
	fmt.Println("| round | mode | job time | exposure per VM: min | median | max | what the VM went through |")
	fmt.Println("|---|---|---|---|---|---|---|")
	jobs := map[string][]float64{}
	exposures := map[string][]float64{}
	for i := range *rounds {
		order := []string{"vm", "datastore"}
		if i%2 == 1 {
			order = []string{"datastore", "vm"}
		}
		for _, group := range order {
			job, exp := b.run(group)
			jobs[group] = append(jobs[group], job.Seconds())
			exposures[group] = append(exposures[group], float64(exp[len(exp)/2])/float64(time.Millisecond))
			ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
			fmt.Printf("| %d | %s | %.1f s | %s | %s | %s | %s |\n", i+1, modeName[group], job.Seconds(), ms(exp[0]), ms(exp[len(exp)/2]), ms(exp[len(exp)-1]), modeWhat[group])
		}
	}
	jv, jg := median(jobs["vm"]), median(jobs["datastore"])
	ev, eg := median(exposures["vm"]), median(exposures["datastore"])
	fmt.Printf("\nmedians over %d rounds: job %.1f s VM by VM, %.1f s as a group (%.2fx); exposure %.0f ms against %.0f ms (%.0fx less as a group)\n",
		*rounds, jv, jg, jg/jv, ev, eg, ev/eg)
}

var (
	modeName = map[string]string{"vm": "VM by VM", "datastore": "group (reflink)"}
	modeWhat = map[string]string{"vm": "running under copy-before-write (fleecing) from snapshot to removal",
		"datastore": "stopped (and frozen if quiesced) for the one reflink snapshot"}
)

// bench runs the policies of one mode and measures them.
type bench struct {
	ctx      context.Context
	eng      *engine.Engine
	cat      *enginetest.Catalog
	vms      int
	snapshot string
	cold     bool
}

// run backs every guest up in full, VM by VM (group "vm") or as a group
// ("datastore"), and returns the job time and each VM's exposure, sorted.
func (b *bench) run(group string) (time.Duration, []time.Duration) {
	if b.cold {
		dropCaches()
	}
	p := policy.Policy{Name: "bench-" + group, Connection: "lab", Group: group, Mode: "full", Snapshot: b.snapshot}
	res, err := b.eng.Run(b.ctx, p)
	benchutil.Check(err)
	if res.Job.Status != catalog.StatusSuccess {
		benchutil.Fatalf("%s: %s %s %+v", group, res.Job.Status, res.Job.Error, res.Failed())
	}
	evs, err := b.cat.ListEvents(b.ctx, catalog.EventFilter{JobID: res.Job.ID})
	benchutil.Check(err)
	var exp []time.Duration
	if group == "datastore" {
		for _, e := range evs {
			if e.Kind == "group-snapshot" {
				w := time.Duration(benchutil.Number(e.Fields["seconds"]) * float64(time.Second))
				for range int(benchutil.Number(e.Fields["vms"])) {
					exp = append(exp, w)
				}
			}
		}
	} else {
		created := map[int64]time.Time{}
		for _, e := range evs {
			switch e.Kind {
			case "snapshot-create":
				created[e.TaskID] = e.Time
			case "snapshot-remove":
				if c, ok := created[e.TaskID]; ok {
					exp = append(exp, e.Time.Sub(c))
				}
			}
		}
	}
	if len(exp) != b.vms {
		benchutil.Fatalf("%s: %d exposures measured for %d VMs", group, len(exp), b.vms)
	}
	sort.Slice(exp, func(a, c int) bool { return exp[a] < exp[c] })
	return res.Job.FinishedAt.Sub(res.Job.StartedAt), exp
}

// dropCaches empties the page cache, so that each run reads the disks
// from the datastore's device, as production does with disks larger than
// the host's memory (and guests with cache=none). Without it the VM-by-VM
// runs read what the guests just wrote from memory through their own
// QEMU, while the group reads its clones (other inodes, never cached)
// from the device: a 2-3x difference that is the benchmark's, not the
// modes'.
func dropCaches() {
	unix.Sync()
	if err := os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0); err != nil {
		benchutil.Fatalf("cold page cache: %v (run as root, or with -cold=false)", err)
	}
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
