package verify_test

import (
	"context"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/diskmap"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/repo/verify"
	"github.com/coffer-backup/coffer/internal/store"
)

// damageCase is one kind of damage and what verify must find.
type damageCase struct {
	name string
	// bSpans sizes B's disk (0: 200 spans, one disk map block).
	bSpans int
	// damage harms the repository and returns what verify must report
	// reading every pack, and what the structural check alone must.
	damage func(t *testing.T, f *repotest.TwoSources) (readData, structural []finding)
	// reopen opens the repository again after the damage: what is read at
	// open (config, keys, the segment list) is read then.
	reopen bool
	// notice is what verify must say besides problems; points is how
	// many backup points it must find.
	notice string
	points int
}

// bPack is a pack of B's alone, and its index entries.
func bPack(t *testing.T, f *repotest.TwoSources) (string, []index.Entry) {
	return pack.ObjectName(f.BPacks[1]), repotest.Entries(t, f.R, f.BPacks[1])
}

func bMap(f *repotest.TwoSources) string { return f.B.Disks[0].Map }

func bManifest(f *repotest.TwoSources) string { return "snapshots/" + f.B.ID.String() }

func both(w ...finding) ([]finding, []finding) { return w, w }

func readOnly(w ...finding) ([]finding, []finding) { return w, nil }

func damageCases() []damageCase {
	return []damageCase{
		{name: "pack header", damage: func(t *testing.T, f *repotest.TwoSources) ([]finding, []finding) {
			name, _ := bPack(t, f)
			f.Flip(t, name, 3)
			return readOnly(finding{kind: "pack-header", object: name, repair: repairPacks})
		}},
		{name: "chunk blob of one point", damage: func(t *testing.T, f *repotest.TwoSources) ([]finding, []finding) {
			name, entries := bPack(t, f)
			f.Flip(t, name, int(entries[2].Offset)+20)
			return readOnly(finding{kind: "corrupt-chunk", object: name, dataLoss: true, repair: repairPacks, lost: chunksOf(entries[2:3])})
		}},
		{name: "chunk blob that three points share", damage: func(t *testing.T, f *repotest.TwoSources) ([]finding, []finding) {
			// A's first pack holds chunks of its first point, most of them
			// still used by the two later points.
			uses := repotest.Uses(t, f.R)
			p := firstPackOfA(t, f)
			first, entries := pack.ObjectName(p), repotest.Entries(t, f.R, p)
			var shared index.Entry
			for _, e := range entries {
				if len(uses[e.ID]) == 3 {
					shared = e
					break
				}
			}
			if shared.ID == (id.ID{}) {
				t.Fatal("no chunk of A's first pack is used by all three points")
			}
			f.Flip(t, first, int(shared.Offset)+20)
			return readOnly(finding{kind: "corrupt-chunk", object: first, dataLoss: true, repair: repairPacks, lost: []id.ID{shared.ID}})
		}},
		{name: "pack trailer", damage: func(t *testing.T, f *repotest.TwoSources) ([]finding, []finding) {
			name, _ := bPack(t, f)
			f.Flip(t, name, repotest.SealedTail(f.Read(t, name)))
			return readOnly(finding{kind: "pack-trailer", object: name, repair: repairPacks})
		}},
		{name: "pack tail", damage: func(t *testing.T, f *repotest.TwoSources) ([]finding, []finding) {
			name, _ := bPack(t, f)
			f.Flip(t, name, -3)
			return readOnly(finding{kind: "pack-trailer", object: name, repair: repairPacks})
		}},
		{name: "pack cut short", damage: func(t *testing.T, f *repotest.TwoSources) ([]finding, []finding) {
			name, entries := bPack(t, f)
			// Cut inside the 10th blob: it and every later one are lost,
			// and the trailer with them.
			cut := int64(entries[9].Offset) + int64(entries[9].Length)/2
			f.Truncate(t, name, cut)
			truncated := finding{kind: "truncated-pack", object: name, dataLoss: true, repair: repairPacks, lost: chunksOf(entries[9:])}
			return []finding{truncated, {kind: "pack-trailer", object: name, repair: repairPacks}}, []finding{truncated}
		}},
		{name: "pack deleted", damage: func(t *testing.T, f *repotest.TwoSources) ([]finding, []finding) {
			name, entries := bPack(t, f)
			f.Remove(t, name)
			return both(finding{kind: "missing-pack", object: name, dataLoss: true, repair: repairIndex, lost: chunksOf(entries)})
		}},
		{name: "index segment block", damage: func(t *testing.T, f *repotest.TwoSources) ([]finding, []finding) {
			name := index.ObjectName(f.BSegment)
			f.Flip(t, name, 16+40)
			return both(finding{kind: "index-segment", object: name, repair: repairIndex})
		}},
		{name: "index segment header", reopen: true, damage: func(t *testing.T, f *repotest.TwoSources) ([]finding, []finding) {
			name := index.ObjectName(f.BSegment)
			f.Flip(t, name, 3)
			return both(finding{kind: "index-segment", object: name, repair: repairIndex})
		}},
		{name: "index segment footer", reopen: true, damage: func(t *testing.T, f *repotest.TwoSources) ([]finding, []finding) {
			name := index.ObjectName(f.BSegment)
			f.Flip(t, name, repotest.SealedTail(f.Read(t, name)))
			return both(finding{kind: "index-segment", object: name, repair: repairIndex})
		}},
		{name: "index segment deleted", reopen: true, damage: func(t *testing.T, f *repotest.TwoSources) ([]finding, []finding) {
			f.Remove(t, index.ObjectName(f.BSegment))
			return both(finding{kind: "index-segment", object: "index/", repair: repairIndex})
		}},
		{name: "disk map header", damage: func(t *testing.T, f *repotest.TwoSources) ([]finding, []finding) {
			f.Flip(t, bMap(f), 3)
			return both(finding{kind: "disk-map", object: bMap(f), repair: repairSnapshots})
		}},
		{name: "disk map second block", bSpans: diskmap.BlockIDs + 200, damage: func(t *testing.T, f *repotest.TwoSources) ([]finding, []finding) {
			f.Flip(t, bMap(f), repotest.BeforeTail(f.Read(t, bMap(f))))
			d := f.B.Disks[0]
			spans := int64(diskmap.ChunkCount(d.Size, d.ChunkSize)) - diskmap.BlockIDs
			return both(finding{kind: "disk-map", object: bMap(f), dataLoss: true, repair: repairSnapshots, affects: []verify.Affected{{
				Snapshot: f.B.ID.Short(), Source: f.B.Source.VMName, Disk: d.Name, Offset: diskmap.BlockIDs * int64(d.ChunkSize), Spans: spans}}})
		}},
		{name: "disk map deleted", damage: func(t *testing.T, f *repotest.TwoSources) ([]finding, []finding) {
			f.Remove(t, bMap(f))
			d := f.B.Disks[0]
			return both(finding{kind: "disk-map", object: bMap(f), dataLoss: true, repair: repairSnapshots, affects: []verify.Affected{{
				Snapshot: f.B.ID.Short(), Source: f.B.Source.VMName, Disk: d.Name, Offset: -1, Spans: int64(diskmap.ChunkCount(d.Size, d.ChunkSize))}}})
		}},
		{name: "manifest header", damage: func(t *testing.T, f *repotest.TwoSources) ([]finding, []finding) {
			f.Flip(t, bManifest(f), 3)
			return both(finding{kind: "manifest", object: bManifest(f), repair: repairSnapshots})
		}},
		{name: "manifest body", notice: "1 disk map(s) belong to no backup point", points: 3, damage: func(t *testing.T, f *repotest.TwoSources) ([]finding, []finding) {
			f.Flip(t, bManifest(f), 40)
			return both(finding{kind: "manifest", object: bManifest(f), repair: repairSnapshots})
		}},
		{name: "manifest deleted", notice: "1 disk map(s) belong to no backup point", points: 3, damage: func(t *testing.T, f *repotest.TwoSources) ([]finding, []finding) {
			f.Remove(t, bManifest(f))
			return nil, nil // a notice, checked below
		}},
		{name: "key file copy", reopen: true, damage: func(t *testing.T, f *repotest.TwoSources) ([]finding, []finding) {
			name := keyFile(t, f.R)
			f.Truncate(t, name, 10)
			return both(finding{kind: "key", object: name, repair: "coffer repair keys"})
		}},
		{name: "config", reopen: true, damage: func(t *testing.T, f *repotest.TwoSources) ([]finding, []finding) {
			f.Flip(t, "config", len(f.Read(t, "config"))/2)
			return both(finding{kind: "config", object: "config", repair: "coffer repair config"})
		}},
	}
}

// firstPackOfA is the pack holding the chunk of A's first span.
func firstPackOfA(t *testing.T, f *repotest.TwoSources) pack.ID {
	ctx := context.Background()
	m, err := f.R.OpenDiskMap(ctx, f.A[0].Disks[0].Map)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := m.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ids {
		if x != (id.ID{}) {
			loc, err := f.R.Locate(ctx, x)
			if err != nil {
				t.Fatal(err)
			}
			return loc.Pack
		}
	}
	t.Fatal("A's first disk is all holes")
	return pack.ID{}
}

func keyFile(t *testing.T, r *repo.Repository) string {
	var name string
	if err := r.Store().List(context.Background(), "keys/", func(fi store.ObjectInfo) error {
		if !strings.HasSuffix(fi.Name, ".copy") {
			name = fi.Name
		}
		return nil
	}); err != nil || name == "" {
		t.Fatalf("no key file: %v", err)
	}
	return name
}

// TestEachDamageGivesItsFinding damages one object of B's in each way a
// disk or a hand can and checks that verify reports exactly that: the
// kind of damage, the object, data loss or metadata only, the points,
// disks and offsets that lost data (computed from the disk maps), A's
// points intact, and the repair that mends it. Bit rot inside a pack is
// found only by reading the data; a pack that is cut short or gone, and
// damaged metadata, by the structural check as well.
func TestEachDamageGivesItsFinding(t *testing.T) {
	templates := map[int]*repotest.TwoSources{}
	for _, c := range damageCases() {
		if templates[c.bSpans] == nil {
			templates[c.bSpans] = repotest.NewTwoSources(t, c.bSpans)
		}
	}
	for _, c := range damageCases() {
		t.Run(c.name, func(t *testing.T) {
			f := templates[c.bSpans].Clone(t)
			uses := repotest.Uses(t, f.R) // before the damage: every chunk's spans
			withData, structural := c.damage(t, f)
			if c.reopen {
				f.Reopen(t)
			}
			// The last run sorts in a few KiB: its records spill to
			// files, which must change nothing of what it finds.
			for _, rep := range []*verify.Report{run(t, f.R, verify.Options{NoRecord: true}), run(t, f.R, verify.Options{ReadData: true, NoRecord: true}),
				run(t, f.R, verify.Options{ReadData: true, NoRecord: true, MemoryBudget: 4 << 10})} {
				want := withData
				if rep.PacksRead == 0 {
					want = structural
				}
				check(t, rep, uses, want)
				if c.points == 0 {
					c.points = 4
				}
				notices := strings.Join(rep.Notices, "\n")
				if rep.Snapshots != c.points || c.notice == "" && notices != "" || !strings.Contains(notices, c.notice) {
					t.Errorf("%d points, notices %q; want %d points and a notice %q", rep.Snapshots, notices, c.points, c.notice)
				}
			}
		})
	}
}
