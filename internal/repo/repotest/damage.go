package repotest

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
)

// TwoSources is a repository on local disk for the tests of verification
// and repair, with backup points of two sources that share no chunk:
// A, three points of a VM with two disks, which share most chunks (an
// incremental rewrites a few spans), and B, one point with one disk of
// other data (the generator names both VMs "synthetic"). It knows which objects are B's alone, so damage to them must
// be reported against B only, and A must stay intact.
type TwoSources struct {
	*Local
	A        []*repo.Point // oldest first
	B        *repo.Point
	BPacks   []pack.ID // the packs B's backup wrote
	BSegment id.ID     // the index segment B's backup wrote
}

// NewTwoSources generates the repository; B's disk has about bSpans spans
// (more than diskmap.BlockIDs gives its map two blocks), of which about
// 200 hold data, the rest are holes.
func NewTwoSources(t testing.TB, bSpans int) *TwoSources {
	t.Helper()
	ctx := context.Background()
	f := &TwoSources{Local: NewLocal(t, repo.InitOptions{ChunkSize: repo.MinChunkSize, PackSize: 1 << 20})}
	a := Synthetic{Points: 3, Disks: 2, References: 600, ChunksPerPack: 16, Seed: 1}
	if _, err := a.Generate(ctx, f.R); err != nil {
		t.Fatal(err)
	}
	snaps, packs, segs := f.list(t, "snapshots/"), f.list(t, "data/"), f.list(t, "index/")
	f.A = f.Points(t)
	b := Synthetic{Points: 1, Disks: 1, References: 200, HoleRate: 1 - 200/float64(max(bSpans, 211)), ChunksPerPack: 16, Seed: 2}
	if _, err := b.Generate(ctx, f.R); err != nil {
		t.Fatal(err)
	}
	for _, name := range f.list(t, "snapshots/") {
		if !slices.Contains(snaps, name) {
			s, err := f.R.LoadPoint(ctx, mustParse(t, strings.TrimPrefix(name, "snapshots/")))
			if err != nil {
				t.Fatal(err)
			}
			f.B = s
		}
	}
	for _, name := range f.list(t, "data/") {
		if !slices.Contains(packs, name) {
			p, err := pack.ParseObjectName(name)
			if err != nil {
				t.Fatal(err)
			}
			f.BPacks = append(f.BPacks, p)
		}
	}
	for _, name := range f.list(t, "index/") {
		if !slices.Contains(segs, name) {
			f.BSegment = mustParse(t, strings.TrimPrefix(name, "index/"))
		}
	}
	if len(f.A) != 3 || f.B == nil || len(f.BPacks) < 3 || f.BSegment == (id.ID{}) {
		t.Fatalf("generated %d points of A, B %v, %d packs of B", len(f.A), f.B != nil, len(f.BPacks))
	}
	return f
}

// Clone copies the repository into a new directory of t and opens the
// copy: one generated repository serves many cases of damage.
func (f *TwoSources) Clone(t testing.TB) *TwoSources {
	t.Helper()
	g := *f
	g.Local = &Local{Dir: filepath.Join(t.TempDir(), "repo")}
	if err := os.CopyFS(g.Dir, os.DirFS(f.Dir)); err != nil {
		t.Fatal(err)
	}
	g.Reopen(t)
	return &g
}

func mustParse(t testing.TB, s string) id.ID {
	t.Helper()
	x, err := id.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func (f *TwoSources) list(t testing.TB, prefix string) []string {
	t.Helper()
	var out []string
	if err := f.R.Store().List(context.Background(), prefix, func(fi store.ObjectInfo) error {
		out = append(out, fi.Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// Points loads the readable backup points, oldest first.
func (f *TwoSources) Points(t testing.TB) []*repo.Point {
	t.Helper()
	snaps, err := f.R.Points(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return snaps
}

// Use is one span of one disk of a backup point.
type Use struct {
	Point *repo.Point
	Disk  int
	Span  uint64
}

// Uses maps every chunk the readable points reference, through the disk
// maps that can be read, to the spans that reference it, in order of
// point, disk and span.
func Uses(t testing.TB, r *repo.Repository) map[id.ID][]Use {
	t.Helper()
	ctx := context.Background()
	snaps, err := r.Points(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[id.ID][]Use{}
	for _, s := range snaps {
		for d, disk := range s.Disks {
			m, err := r.OpenDiskMap(ctx, disk.Map)
			if err != nil {
				continue
			}
			err = m.Scan(ctx, func(i uint64, x id.ID) error {
				if x != (id.ID{}) && x != repo.LostChunk {
					out[x] = append(out[x], Use{Point: s, Disk: d, Span: i})
				}
				return nil
			}, func(uint64, uint64, error) {})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	return out
}

// Readable returns the chunks of uses that load: located by the index,
// read from their pack, authenticated and hashed to their ID.
func Readable(t testing.TB, r *repo.Repository, uses map[id.ID][]Use) map[id.ID]bool {
	t.Helper()
	dec, err := r.NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	out := map[id.ID]bool{}
	var buf []byte
	for x := range uses {
		if buf, err = r.LoadChunk(context.Background(), x, dec, buf[:0]); err == nil {
			out[x] = true
		}
	}
	return out
}

// Entries returns the index entries that place chunks in pack p, in
// offset order.
func Entries(t testing.TB, r *repo.Repository, p pack.ID) []index.Entry {
	t.Helper()
	var out []index.Entry
	if err := r.Index().Iterate(context.Background(), func(e index.Entry) error {
		if e.Pack == p {
			out = append(out, e)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Offset < out[j].Offset })
	return out
}

// DiskLoss is what losing some chunks costs one disk of one point: the
// spans that referenced them and the first of those spans' offsets.
type DiskLoss struct {
	Point, VM, Disk string
	Offset          int64
	Spans           int64
}

// LostSpans is, per disk of every point that used one of the lost
// chunks, what verify and the repairs must report lost, ordered by point
// and disk.
func LostSpans(uses map[id.ID][]Use, lost []id.ID) []DiskLoss {
	byDisk := map[string]*DiskLoss{}
	for _, x := range lost {
		for _, u := range uses[x] {
			d := u.Point.Disks[u.Disk]
			k := u.Point.ID.Short() + "/" + d.Name
			off := int64(u.Span) * int64(d.ChunkSize)
			l := byDisk[k]
			if l == nil {
				l = &DiskLoss{Point: u.Point.ID.Short(), VM: u.Point.Source.VMName, Disk: d.Name, Offset: off}
				byDisk[k] = l
			}
			l.Offset = min(l.Offset, off)
			l.Spans++
		}
	}
	out := make([]DiskLoss, 0, len(byDisk))
	for _, l := range byDisk {
		out = append(out, *l)
	}
	slices.SortFunc(out, func(a, b DiskLoss) int { return strings.Compare(a.Point+"/"+a.Disk, b.Point+"/"+b.Disk) })
	return out
}
