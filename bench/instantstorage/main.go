// Command instantstorage measures instant recovery from a kept storage
// snapshot (issue 17) against instant recovery from the repository and a
// full restore, as the time until a guest has verified its disk:
//
//	go run ./bench/instantstorage                 # a 1 GiB disk holding 256 MiB
//	go run ./bench/instantstorage -disk 4G -data 1024
//
// One writing guest (TCG) runs on a qcow2 disk in a loop-mounted XFS
// (reflink=1). A group policy that keeps storage snapshots backs it up
// once, into a local repository and as a kept storage snapshot of the
// same instant. Then, for each way back, the clock runs from the request
// until a second guest, booted on what came back, has read and checked
// every block of the workload on its disk ("COFFER CHECK OK"):
//
//   - storage snapshot: `storage-snapshots restore` clones the disk file
//     out of the kept snapshot onto the datastore, and the guest boots
//     on the clone;
//   - instant, repository: the guest boots on a throw-away overlay whose
//     backing file is the point's disk served over NBD from the
//     repository (what `coffer instant start` does);
//   - full restore: the point is restored to a raw file on the datastore,
//     then the guest boots on it.
//
// Needs root (mount), loop devices and QEMU.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/bench/benchutil"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/engine/enginetest"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/offload"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/restore/nbdexport"
	"github.com/coffer-backup/coffer/internal/storagesnap"
	"github.com/coffer-backup/coffer/internal/store/local"
)

func main() {
	size := flag.String("disk", "1G", "the guest's disk size")
	dataMiB := flag.Int("data", 256, "MiB the guest's workload writes before the backup")
	runs := flag.Int("runs", 3, "measurements of each way back (the median is printed)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "coffer-bench-instantstorage-")
	benchutil.Check(err)
	benchutil.AtExit(func() { os.RemoveAll(dir) })
	mnt := mountXFS(dir, 6<<30)
	ds := filepath.Join(mnt, "vms")
	benchutil.Check(os.Mkdir(ds, 0o755))

	gimg, err := guestvm.Build(ctx)
	benchutil.Check(err)
	disk := filepath.Join(ds, "web-1.qcow2")
	benchutil.Run("qemu-img", "create", "-q", "-f", "qcow2", disk, *size)
	base := *dataMiB << 20 / guestvm.BlockSize
	vm, err := guestvm.Start(ctx, gimg, guestvm.Options{Name: "web-1", UUID: "00000000-0000-4000-8000-000000000001",
		Dir: filepath.Join(dir, "web-1"), Mode: "write", Base: base, Interval: 50 * time.Millisecond,
		Disks: []guestvm.Disk{{ID: "vda", Path: disk, Format: "qcow2"}}})
	benchutil.Check(err)
	benchutil.AtExit(vm.Kill)
	_, err = vm.WaitConsole(ctx, "COFFER READY")
	benchutil.Check(err)

	state := filepath.Join(dir, "state")
	r := newRepo(ctx, filepath.Join(dir, "repo"))
	label, snap := backUp(ctx, vm, ds, state, r)
	vm.Kill()

	fmt.Printf("One guest (TCG), %s qcow2 disk holding %d MiB of self-checking blocks, on an XFS (reflink=1) loop device;\n", *size, *dataMiB)
	fmt.Printf("time from the request until a guest booted on what came back has checked every block (COFFER CHECK OK)\n\n")
	fmt.Println("| way back | disk back after (median) | verified after (median) | ratio to the storage snapshot | all runs, verified after |")
	fmt.Println("|---|---|---|---|---|")
	type result struct {
		back, proved []time.Duration
	}
	results := map[string]*result{}
	ways := []string{"storage", "instant", "restore"}
	measure := func(name string, run int, bring func(dir string) guestvm.Disk) {
		sub := filepath.Join(ds, fmt.Sprintf("%s-%d", name, run))
		benchutil.Check(os.Mkdir(sub, 0o755))
		start := time.Now()
		d := bring(sub)
		back := time.Since(start)
		g, err := guestvm.Start(ctx, gimg, guestvm.Options{Name: "check-" + name, Dir: filepath.Join(dir, fmt.Sprintf("check-%s-%d", name, run)), Mode: "check", Disks: []guestvm.Disk{d}})
		benchutil.Check(err)
		_, err = g.WaitConsole(ctx, "COFFER CHECK OK")
		proved := time.Since(start)
		g.Kill()
		benchutil.Check(err)
		benchutil.Check(os.RemoveAll(sub))
		if results[name] == nil {
			results[name] = &result{}
		}
		results[name].back = append(results[name].back, back)
		results[name].proved = append(results[name].proved, proved)
	}
	for run := range *runs { // interleaved, so that a busy moment of the machine hits every way
		measure("storage", run, func(sub string) guestvm.Disk {
			got, err := storagesnap.Restore(ctx, state, label, "web-1", sub, offload.CopyOptions{})
			benchutil.Check(err)
			if got[0].Method != offload.Cloned {
				benchutil.Fatalf("the restore from the storage snapshot was %s, not cloned", got[0].Method)
			}
			return guestvm.Disk{ID: "vda", Path: got[0].Target, Format: "qcow2"}
		})
		measure("instant", run, func(sub string) guestvm.Disk {
			exports, names, err := nbdexport.Exports(ctx, r, snap)
			benchutil.Check(err)
			sock := filepath.Join(sub, "nbd.sock")
			l, err := nbdexport.Listen("unix", sock)
			benchutil.Check(err)
			sctx, stop := context.WithCancel(ctx)
			benchutil.AtExit(stop)
			go nbdexport.Serve(sctx, l, exports, names, nil)
			overlay := filepath.Join(sub, "vda.overlay.qcow2")
			benchutil.Check(qemu.CreateNBDOverlay(ctx, overlay, sock, snap.Disks[0].Key, snap.Disks[0].Size, 0))
			return guestvm.Disk{ID: "vda", Path: overlay, Format: "qcow2"}
		})
		measure("restore", run, func(sub string) guestvm.Disk {
			out := filepath.Join(sub, "web-1.raw")
			_, err := restore.ToFile(ctx, r, snap, snap.Disks[0], out, restore.FileOptions{})
			benchutil.Check(err)
			return guestvm.Disk{ID: "vda", Path: out, Format: "raw"}
		})
	}
	titles := map[string]string{"storage": "storage snapshot (clone)", "instant": "instant recovery from the repository (NBD)", "restore": "full restore, then boot"}
	ref := median(results["storage"].proved)
	for _, name := range ways {
		x := results[name]
		var all []string
		for _, d := range x.proved {
			all = append(all, fmt.Sprintf("%.1f s", d.Seconds()))
		}
		fmt.Printf("| %s | %.3f s | %.1f s | %.2fx | %s |\n", titles[name], median(x.back).Seconds(), median(x.proved).Seconds(),
			median(x.proved).Seconds()/ref.Seconds(), strings.Join(all, ", "))
	}
	benchutil.Exit(0)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func mountXFS(dir string, size int64) string {
	mnt, img := filepath.Join(dir, "mnt"), filepath.Join(dir, "xfs.img")
	benchutil.Check(os.Mkdir(mnt, 0o755))
	f, err := os.Create(img)
	benchutil.Check(err)
	benchutil.Check(f.Truncate(size))
	f.Close()
	benchutil.Run("mkfs.xfs", "-q", "-m", "reflink=1", img)
	benchutil.Run("mount", "-o", "loop", img, mnt)
	benchutil.AtExit(func() { exec.Command("umount", mnt).Run() })
	return mnt
}

func newRepo(ctx context.Context, path string) *repo.Repository {
	st, err := local.Create(path)
	benchutil.Check(err)
	_, err = repo.Init(ctx, st, repo.InitOptions{Password: []byte("pw"), KDF: repotest.FastKDF})
	benchutil.Check(err)
	r, err := repo.Open(ctx, st, []byte("pw"), repo.Options{})
	benchutil.Check(err)
	return r
}

// backUp runs a group policy keeping one storage snapshot over the guest
// and returns the kept snapshot's label and the repository's point.
func backUp(ctx context.Context, vm *guestvm.VM, ds, state string, r *repo.Repository) (string, *repo.Point) {
	conn, err := qemu.New(qemu.Config{Sockets: []string{vm.QMPPath}, StateDir: state, Connections: 2})
	benchutil.Check(err)
	providers := policy.StorageSnapshots{{Name: "xfs", Kind: "reflink", Connections: []string{"lab"}, Datastores: []string{ds}}}
	eng, err := engine.New(ctx, engine.Options{
		Config:  &policy.Config{Limits: policy.Limits{Tasks: 2}, Connections: []policy.Connection{{Name: "lab", Kind: "qemu"}}, StorageSnapshots: providers},
		Catalog: enginetest.NewCatalog(), Connectors: map[string]hypervisor.Connector{"lab": conn},
		StorageSnapshotters: storagesnap.For(providers, state, nil),
		OpenRepository:      func(context.Context, string) (*repo.Repository, error) { return r, nil },
		FlushInterval:       50 * time.Millisecond})
	benchutil.Check(err)
	defer eng.Close()
	res, err := eng.Run(ctx, policy.Policy{Name: "zdb", Connection: "lab", Group: "datastore", Mode: "full", KeepStorageSnapshots: 1})
	benchutil.Check(err)
	if res.Job.Status != catalog.StatusSuccess || len(res.Tasks) != 1 {
		benchutil.Fatalf("backup: %s %s %+v", res.Job.Status, res.Job.Error, res.Failed())
	}
	kept, err := storagesnap.List(state)
	benchutil.Check(err)
	if len(kept) != 1 {
		benchutil.Fatalf("%d storage snapshots kept, want 1", len(kept))
	}
	snaps, err := r.Points(ctx, nil)
	benchutil.Check(err)
	if len(snaps) != 1 {
		benchutil.Fatalf("%d points in the repository, want 1", len(snaps))
	}
	return kept[0].Label, snaps[0]
}
