package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/coffer-backup/coffer/internal/media/volume"
	"github.com/coffer-backup/coffer/internal/media/vtl"
	"github.com/coffer-backup/coffer/internal/mediacopy"
	"github.com/coffer-backup/coffer/internal/repo"
)

// drivesTable copies every point through d drives at once (a session per
// drive, mediacopy.CopyOnDrives), for each d, each drive pacing itself at
// rate: openBench's NetBackup wrote eight streams to eight drives. The
// copy should scale with the drives until the repository side (spooling
// the points) is the bottleneck.
func drivesTable(ctx context.Context, dir string, src *repo.Repository, snaps []*repo.Point, drives []int, mux int, rate int64, block int) {
	fmt.Println("| drives | streams per drive | copy MiB/s | share of the drives' rate | vs 1 drive |")
	fmt.Println("|---|---|---|---|---|")
	var base float64
	for _, d := range drives {
		libDir, err := os.MkdirTemp(dir, "vtl-")
		check(err)
		check(vtl.Create(libDir, vtl.Config{Drives: d, Slots: 2 * d, Capacity: 8 << 30, Rate: rate, RepositionTime: time.Second, Throttle: true}))
		l, err := vtl.Open(libDir)
		check(err)
		var libs []*volume.Library
		for i := range d {
			check(l.AddCartridge(fmt.Sprintf("BENCH%d", i+1), i+1, vtl.CartridgeInfo{}))
			dr, _ := l.Drive(i)
			libs = append(libs, &volume.Library{Changer: l, Drive: dr, DriveIndex: i})
		}
		start := time.Now()
		res, err := mediacopy.CopyOnDrives(ctx, src, snaps, libs, mediacopy.CopyOptions{Pool: "bench", BlockSize: block, SpoolDir: dir,
			WriteOptions: volume.WriteOptions{Multiplex: mux}})
		check(err)
		elapsed := time.Since(start).Seconds()
		var bytes int64
		for _, r := range res {
			bytes += r.Bytes
		}
		mibs := float64(bytes) / elapsed / (1 << 20)
		if base == 0 {
			base = mibs
		}
		fmt.Printf("| %d | %d | %.1f | %.0f%% | %.2fx |\n", d, mux, mibs, 100*float64(bytes)/elapsed/float64(int64(d)*rate), mibs/base)
		l.Close()
		check(os.RemoveAll(libDir))
	}
}
