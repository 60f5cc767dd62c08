// Command media measures multiplexing onto a tape drive, the seeds'
// experiment (NetBackup: 4:1 costs about 25% of image restore speed, 2:1
// did best), on coffer's virtual tape library with a rate-limited drive
// and a repositioning cost:
//
//   - copy throughput: N backup points written at once onto one drive
//     (N = 1, 2, 4, 8), the drive pacing itself at its configured rate;
//     reported as the data rate and as a share of the drive's rate;
//
//   - the image restore of one VM from that volume: the drive time it costs
//     (modelled from the rate and the repositioning cost, so that the
//     figure does not depend on the machine's load) and the bytes read
//     divided by the bytes needed, for the two ways to read a multiplexed
//     stream: locating onto each of its runs of blocks, or reading through
//     the other streams' blocks;
//
//   - both with runs of 1 block (pure interleaving) and of longer runs (an
//     in-memory spool keeping a point's blocks together).
//
//     go run ./bench/media                                  # 8 points of 16 MiB, 40 MiB/s, 1 s locates
//     go run ./bench/media -points 8 -mib 32 -drives 1,2,4  # copy through several drives at once
//     go run ./bench/media -points 8 -mib 32 -rate 80 -reposition 2s -runs 1,16
//
// The points are random (incompressible) disks backed up into a fresh
// encrypted repository, so the bytes on tape are the disks' bytes.
package main

import (
	"context"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/media/format"
	"github.com/coffer-backup/coffer/internal/media/volume"
	"github.com/coffer-backup/coffer/internal/media/vtl"
	"github.com/coffer-backup/coffer/internal/mediacopy"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/store/local"
)

func main() {
	points := flag.Int("points", 8, "backup points (VMs) copied")
	mib := flag.Int("mib", 16, "MiB of random data per point")
	rateMiB := flag.Int("rate", 40, "the drive's rate, MiB/s")
	reposition := flag.Duration("reposition", time.Second, "the fixed cost of a locate (plus the distance at 10x the rate)")
	factors := flag.String("factors", "1,2,4,8", "multiplexing factors")
	runs := flag.String("runs", "1,16", "blocks of one point kept together")
	block := flag.Int("block", format.DefaultBlockSize, "block size")
	drives := flag.String("drives", "", "instead: copy through this many drives at once, each at -rate (e.g. 1,2,4)")
	flag.Parse()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "coffer-bench-media-")
	check(err)
	defer os.RemoveAll(dir)

	src, snaps := makePoints(ctx, dir, *points, *mib)
	spools := spoolAll(ctx, dir, src, snaps)
	rate := int64(*rateMiB) << 20
	fmt.Printf("# %d points of %d MiB, drive %d MiB/s, locate %v + distance at %d MiB/s, blocks of %d KiB\n\n",
		*points, *mib, *rateMiB, *reposition, 10**rateMiB, *block>>10)
	if *drives != "" {
		drivesTable(ctx, dir, src, snaps, ints(*drives), 2, rate, *block)
		return
	}
	fmt.Println("| streams | factor | run (blocks) | copy MiB/s | share of drive rate | restore, locating: drive s | locates | read/needed | restore, reading through: drive s | read/needed | best vs 1:1 |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	for _, mode := range []string{"spooled by the copy", "ready (pre-spooled)"} {
		for _, run := range ints(*runs) {
			var base time.Duration
			for _, n := range ints(*factors) {
				write := func(v *volume.Volume, pool volume.Volumes, o volume.WriteOptions) (*volume.WriteResult, error) {
					if mode == "ready (pre-spooled)" {
						return volume.WriteSession(ctx, v, pool, spools.sources(ctx), o)
					}
					return nil, nil
				}
				r := measure(ctx, dir, src, snaps, n, run, rate, *reposition, *block, mode != "ready (pre-spooled)", write)
				best := min(r.locate.busy, r.through.busy)
				if n == 1 {
					base = best
				}
				fmt.Printf("| %s | %d:1 | %d | %.1f | %.0f%% | %.2f | %d | %.2f | %.2f | %.2f | %+.0f%% |\n", mode, n, run,
					r.copyRate/(1<<20), 100*r.copyRate/float64(rate), r.locate.busy.Seconds(), r.locate.locates, r.locate.ratio,
					r.through.busy.Seconds(), r.through.ratio, 100*(best.Seconds()/base.Seconds()-1))
			}
		}
	}
}

// spooled are the points each spooled once into a repository of its own,
// so that every stream has data ready from the start: the writer then
// interleaves them as evenly as it can, the worst case for a restore.
type spooled struct {
	dirs   []string
	points []format.StreamInfo
}

func spoolAll(ctx context.Context, dir string, src *repo.Repository, snaps []*repo.Point) *spooled {
	s := &spooled{}
	for i, snap := range snaps {
		d := filepath.Join(dir, fmt.Sprintf("spool-%d", i))
		check(mediacopy.SpoolPoint(ctx, src, snap, d))
		s.dirs = append(s.dirs, d)
		s.points = append(s.points, format.StreamInfo{Point: snap.ID.String(), VM: snap.Source.VMName, Repository: src.Config().ID})
	}
	return s
}

func (s *spooled) sources(ctx context.Context) []volume.Source {
	var out []volume.Source
	for i, d := range s.dirs {
		out = append(out, volume.Source{Info: s.points[i], Open: func(context.Context) (io.ReadCloser, error) {
			pr, pw := io.Pipe()
			go func() { pw.CloseWithError(mediacopy.WriteStream(ctx, d, pw)) }()
			return pr, nil
		}})
	}
	return out
}

type readCost struct {
	busy    time.Duration
	locates int64
	ratio   float64
}

type result struct {
	copyRate        float64 // payload bytes per second of wall time
	locate, through readCost
}

// measure copies every point at factor n onto a fresh library and reads
// the first point back both ways.
func measure(ctx context.Context, dir string, src *repo.Repository, snaps []*repo.Point, n, run int, rate int64, reposition time.Duration, block int,
	viaCopy bool, write func(*volume.Volume, volume.Volumes, volume.WriteOptions) (*volume.WriteResult, error)) result {
	libDir, err := os.MkdirTemp(dir, "vtl-")
	check(err)
	check(vtl.Create(libDir, vtl.Config{Drives: 1, Slots: 2, Capacity: 8 << 30, Rate: rate, RepositionTime: reposition, Throttle: true}))
	l, err := vtl.Open(libDir)
	check(err)
	defer l.Close()
	check(l.AddCartridge("BENCH1", 1, vtl.CartridgeInfo{}))
	d, _ := l.Drive(0)
	lib := &volume.Library{Changer: l, Drive: d}
	// Points are written n at a time; the session holds them all.
	o := volume.WriteOptions{Multiplex: n, RunBlocks: run}
	var res *volume.WriteResult
	start := time.Now()
	if viaCopy {
		res, err = mediacopy.Copy(ctx, src, snaps, lib, mediacopy.CopyOptions{Pool: "bench", BlockSize: block, SpoolDir: dir, WriteOptions: o})
	} else {
		pool := &volume.Pool{Lib: lib, Name: "bench", BlockSize: block}
		v, perr := pool.First(ctx)
		check(perr)
		start = time.Now() // labelling is not the copy
		res, err = write(v, pool, o)
	}
	check(err)
	var out result
	out.copyRate = float64(res.Bytes) / time.Since(start).Seconds()
	defer os.RemoveAll(libDir)

	l.SetThrottle(false) // restores are compared by their modelled drive time
	var segs []volume.Placed
	for _, ix := range res.Volumes {
		for _, s := range ix.Segments {
			if s.Point == snaps[0].ID.String() {
				segs = append(segs, volume.Placed{Barcode: ix.Label.Barcode, Segment: s})
			}
		}
	}
	// Mounted once: the restore's cost is reading the stream.
	v, err := lib.Mount(ctx, segs[0].Barcode)
	check(err)
	read := func(through int64) readCost {
		// From the stream's first block: both ways start with the same
		// locate, left out.
		check(d.Locate(segs[0].First()))
		before := d.Stats()
		st, err := volume.ReadStream(ctx, mounted{v}, segs, io.Discard, volume.ReadOptions{ReadThrough: through})
		check(err)
		after := d.Stats()
		return readCost{busy: after.Busy - before.Busy, locates: st.Locates,
			ratio: float64(st.BlocksRead) / float64(st.BlocksNeeded)}
	}
	out.locate = read(0)
	out.through = read(1 << 40)
	return out
}

// mounted is a volume already in the drive.
type mounted struct{ v *volume.Volume }

func (m mounted) Mount(context.Context, string) (*volume.Volume, error) { return m.v, nil }

// makePoints backs up n random disks into a new repository.
func makePoints(ctx context.Context, dir string, n, mib int) (*repo.Repository, []*repo.Point) {
	st, err := local.Create(filepath.Join(dir, "repo"))
	check(err)
	kdf := &crypto.KDF{Algorithm: "argon2id", Time: 1, MemoryKiB: 8 << 10, Threads: 1, Salt: []byte("0123456789abcdef")}
	_, err = repo.Init(ctx, st, repo.InitOptions{Password: []byte("bench"), KDF: kdf})
	check(err)
	r, err := repo.Open(ctx, st, []byte("bench"), repo.Options{})
	check(err)
	var snaps []*repo.Point
	buf := make([]byte, 1<<20)
	for i := range n {
		img := filepath.Join(dir, fmt.Sprintf("vm%d.img", i))
		f, err := os.Create(img)
		check(err)
		for range mib {
			_, _ = rand.Read(buf)
			_, err = f.Write(buf)
			check(err)
		}
		check(f.Close())
		srcDisk, err := backup.OpenFile(img)
		check(err)
		alloc, err := srcDisk.Allocated()
		check(err)
		w, err := r.NewWriter(ctx, "bench")
		check(err)
		snap, err := backup.Run(ctx, w, backup.Request{Source: repo.Source{Kind: "disk", VMName: fmt.Sprintf("vm%d", i)},
			Disks: []backup.Disk{{Key: "0", Name: "vm", Reader: srcDisk, Size: srcDisk.Size(), Allocated: alloc}}}, backup.Options{})
		check(err)
		check(w.Close(ctx))
		srcDisk.Close()
		os.Remove(img)
		snaps = append(snaps, snap)
	}
	return r, snaps
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			log.Fatalf("%q: want positive integers separated by commas", s)
		}
		out = append(out, n)
	}
	return out
}

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
