// Command drship measures shipping a btrfs datastore's kept storage
// snapshots to a second btrfs filesystem (issue 40): the bytes and time of
// each incremental shipment (btrfs send -p | btrfs receive, through
// internal/storagesnap/ship) against a full copy of the same disk file
// onto the DR filesystem and a full send of the same snapshot. With
// -kind reflink, the datastore and the DR filesystem are XFS with reflink,
// and each shipment writes the changed extents into a clone of the
// previous copy (bytes: those written):
//
//	go run ./bench/drship                       # a 512 MiB disk, 4 rounds of 8 MiB changed
//	go run ./bench/drship -disk 2GiB -change 32MiB -rounds 4
//	go run ./bench/drship -kind reflink
//
// The disk is a raw file of random data in a loop-mounted btrfs
// subvolume; each round overwrites -change bytes of it in 1 MiB blocks at
// random offsets (fsynced), keeps a storage snapshot as a policy run with
// keep-storage-snapshots does, and ships it. Needs root (mount), loop
// devices and btrfs-progs.
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"github.com/coffer-backup/coffer/bench/benchutil"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/storagesnap"
	"github.com/coffer-backup/coffer/internal/storagesnap/ship"
)

func main() {
	disk := flag.String("disk", "512MiB", "the disk file's size")
	change := flag.String("change", "8MiB", "bytes changed between two kept snapshots (1 MiB blocks)")
	rounds := flag.Int("rounds", 4, "incremental shipments")
	kind := flag.String("kind", "btrfs", "the datastores' kind: btrfs or reflink (XFS)")
	flag.Parse()
	size, changed := benchutil.Size(*disk), benchutil.Size(*change)
	ctx := context.Background()
	work, err := os.MkdirTemp("", "drship-")
	benchutil.Check(err)
	benchutil.AtExit(func() { _ = os.RemoveAll(work) })
	src := mountFS(work, "src", *kind, size*3)
	dr := mountFS(work, "dr", *kind, size*3)
	root := filepath.Join(src, "vms")
	if *kind == "btrfs" {
		benchutil.Run("btrfs", "subvolume", "create", root)
	} else {
		benchutil.Check(os.Mkdir(root, 0o755))
	}
	path := filepath.Join(root, "vda.raw")
	writeRandom(path, size)
	d := hypervisor.DiskInfo{Name: "vda.raw", Path: path, Format: "raw", Size: size, Datastore: root}
	state := filepath.Join(work, "state")
	to := filepath.Join(dr, "lab")
	targets := []ship.Target{{Provider: "sub", Kind: *kind, To: to}}

	fmt.Printf("%s: disk %s, %d rounds of %s changed; load %s\n", *kind, *disk, *rounds, *change, benchutil.LoadAverage())
	fmt.Println("shipment\tbytes sent\ttime\tbytes/changed")
	for round := 0; round <= *rounds; round++ {
		if round > 0 {
			overwrite(path, size, changed)
		}
		keep(ctx, *kind, root, state, fmt.Sprintf("coffer-bench-%d", round), d)
		got, err := ship.Ship(ctx, state, targets)
		benchutil.Check(err)
		if len(got) != 1 {
			benchutil.Fatalf("round %d shipped %d snapshots", round, len(got))
		}
		kind, base := "incremental", float64(changed)
		if round == 0 {
			kind, base = "first (whole)", float64(size)
		}
		fmt.Printf("%s #%d\t%d\t%.2fs\t%.3f\n", kind, round, got[0].Bytes, got[0].Took.Seconds(), float64(got[0].Bytes)/base)
	}
	// Baselines: the same disk copied whole onto the DR filesystem, and
	// the newest snapshot sent whole.
	start := time.Now()
	n := copyFile(path, filepath.Join(dr, "full-copy.raw"))
	fmt.Printf("full copy of the disk\t%d\t%.2fs\t-\n", n, time.Since(start).Seconds())
	if *kind != "btrfs" {
		return
	}
	start = time.Now()
	out := benchutil.Output("sh", "-c", fmt.Sprintf("btrfs send -q %s | wc -c", filepath.Join(root, storagesnap.SnapDir, fmt.Sprintf("coffer-bench-%d", *rounds))))
	fmt.Printf("full send of the newest snapshot\t%s\t%.2fs\t-\n", trim(out), time.Since(start).Seconds())
}

func trim(s string) string {
	for len(s) > 0 && (s[len(s)-1] == '\n' || s[len(s)-1] == ' ') {
		s = s[:len(s)-1]
	}
	return s
}

func mountFS(work, name, kind string, size int64) string {
	img := filepath.Join(work, name+".img")
	f, err := os.Create(img)
	benchutil.Check(err)
	benchutil.Check(f.Truncate(size))
	benchutil.Check(f.Close())
	if kind == "btrfs" {
		benchutil.Run("mkfs.btrfs", "-q", img)
	} else {
		benchutil.Run("mkfs.xfs", "-q", "-m", "reflink=1", img)
	}
	mnt := filepath.Join(work, name)
	benchutil.Check(os.Mkdir(mnt, 0o755))
	benchutil.Run("mount", "-o", "loop", img, mnt)
	benchutil.AtExit(func() { benchutil.Run("umount", mnt) })
	return mnt
}

func keep(ctx context.Context, kind, root, state, label string, d hypervisor.DiskInfo) {
	p := policy.StorageProvider{Name: "sub", Kind: kind, Connections: []string{"lab"}, MinFree: "0"}
	ss, err := storagesnap.Create(ctx, p, root, state, label, []hypervisor.DiskInfo{d})
	benchutil.Check(err)
	k := hypervisor.KeptSnapshot{Policy: "bench", Connection: "lab", VMs: []hypervisor.KeptVM{{VMRef: hypervisor.VMRef{Name: "vm"}, Disks: []hypervisor.DiskInfo{d}}}}
	benchutil.Check(ss.(hypervisor.StorageKeeper).Keep(ctx, k))
}

func writeRandom(path string, size int64) {
	f, err := os.Create(path)
	benchutil.Check(err)
	_, err = io.CopyN(f, rand.Reader, size)
	benchutil.Check(err)
	benchutil.Check(f.Sync())
	benchutil.Check(f.Close())
}

// overwrite writes changed bytes of random data in 1 MiB blocks at random
// block offsets (a block may be hit twice: the change is at most that).
func overwrite(path string, size, changed int64) {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	benchutil.Check(err)
	block := make([]byte, 1<<20)
	for range changed >> 20 {
		_, err := rand.Read(block)
		benchutil.Check(err)
		at, err := rand.Int(rand.Reader, big.NewInt(size>>20))
		benchutil.Check(err)
		_, err = f.WriteAt(block, at.Int64()<<20)
		benchutil.Check(err)
	}
	benchutil.Check(f.Sync())
	benchutil.Check(f.Close())
}

func copyFile(from, to string) int64 {
	in, err := os.Open(from)
	benchutil.Check(err)
	defer func() { _ = in.Close() }()
	out, err := os.Create(to)
	benchutil.Check(err)
	n, err := io.Copy(struct{ io.Writer }{out}, in) // a plain copy: no reflink or copy_file_range shortcut
	benchutil.Check(err)
	benchutil.Check(out.Sync())
	benchutil.Check(out.Close())
	return n
}
