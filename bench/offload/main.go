// Command offload measures FlashCopy Manager's experiment (issue 17),
// scaled down to this machine: N writing guests (TCG) whose disks live in
// one directory of a loop-mounted XFS (reflink=1), backed up in full by
// the job engine twice, VM by VM and as a group, into one repository:
//
//	go run ./bench/offload            # 4 guests
//	go run ./bench/offload -vms 6
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
)

func main() {
	n := flag.Int("vms", 4, "guests on the datastore")
	size := flag.String("disk", "64M", "disk size of each guest")
	mode := flag.String("snapshot", "crash-consistent", "snapshot mode of both runs")
	base := flag.Int("base", 256, "64 KiB blocks each guest writes before the runs (its data: 256 is 16 MiB)")
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

	fmt.Printf("%d guests (TCG, writing every 20 ms), %s qcow2 disks holding %d MiB each, in one directory of an XFS (reflink=1) on a loop device; full backups, snapshot: %s\n\n",
		*n, *size, *base*guestvm.BlockSize>>20, *mode)
	fmt.Println("| mode | job time | exposure per VM: min | median | max | what the VM went through |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, group := range []string{"vm", "datastore"} {
		p := policy.Policy{Name: "bench-" + group, Connection: "lab", Group: group, Mode: "full", Snapshot: *mode}
		res, err := eng.Run(ctx, p)
		benchutil.Check(err)
		if res.Job.Status != catalog.StatusSuccess {
			benchutil.Fatalf("%s: %s %s %+v", group, res.Job.Status, res.Job.Error, res.Failed())
		}
		evs, err := cat.ListEvents(ctx, catalog.EventFilter{JobID: res.Job.ID})
		benchutil.Check(err)
		var exp []time.Duration
		what := "running under copy-before-write (fleecing) from snapshot to removal"
		if group == "datastore" {
			what = "stopped (and frozen if quiesced) for the one reflink snapshot"
			for _, e := range evs {
				if e.Kind == "group-snapshot" {
					w := time.Duration(num(e.Fields["seconds"]) * float64(time.Second))
					for range int(num(e.Fields["vms"])) {
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
		if len(exp) != *n {
			benchutil.Fatalf("%s: %d exposures measured for %d VMs", group, len(exp), *n)
		}
		sort.Slice(exp, func(a, b int) bool { return exp[a] < exp[b] })
		ms := func(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }
		fmt.Printf("| %s | %.1f s | %s | %s | %s | %s |\n", map[string]string{"vm": "VM by VM", "datastore": "group (reflink)"}[group],
			res.Job.FinishedAt.Sub(res.Job.StartedAt).Seconds(), ms(exp[0]), ms(exp[len(exp)/2]), ms(exp[len(exp)-1]), what)
	}
}

func num(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int:
		return float64(x)
	case int64:
		return float64(x)
	}
	return 0
}
