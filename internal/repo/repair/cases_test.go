package repair_test

import (
	"context"
	"testing"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/diskmap"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/repo/repair"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
)

// repairCase is one kind of damage and the repair verify recommends for it.
type repairCase struct {
	name   string
	bSpans int // B's disk (0: 200 spans)
	reopen bool
	repair repairFunc
	damage func(t *testing.T, f *repotest.TwoSources, uses map[id.ID][]repotest.Use) expect
}

// bPack is a pack of B's alone, and its index entries.
func bPack(t *testing.T, f *repotest.TwoSources) (pack.ID, []index.Entry) {
	return f.BPacks[1], repotest.Entries(t, f.R, f.BPacks[1])
}

// movedAside checks that a repair moved object name aside to damaged/.
func movedAside(name string) func(t *testing.T, f *repotest.TwoSources) {
	return func(t *testing.T, f *repotest.TwoSources) {
		ctx := context.Background()
		if _, err := f.R.Store().Stat(ctx, name); err == nil {
			t.Errorf("%s is still in place", name)
		}
		if _, err := f.R.Store().Stat(ctx, "damaged/"+name); err != nil {
			t.Errorf("%s was not moved aside: %v", name, err)
		}
	}
}

func spans(d repo.Disk) int64 { return int64(diskmap.ChunkCount(d.Size, d.ChunkSize)) }

func packCases() []repairCase {
	flipped := func(at func(raw []byte, entries []index.Entry) int) func(t *testing.T, f *repotest.TwoSources, _ map[id.ID][]repotest.Use) expect {
		return func(t *testing.T, f *repotest.TwoSources, _ map[id.ID][]repotest.Use) expect {
			p, entries := bPack(t, f)
			f.Flip(t, pack.ObjectName(p), at(f.Read(t, pack.ObjectName(p)), entries))
			return expect{kept: int64(len(entries)), check: movedAside(pack.ObjectName(p))}
		}
	}
	return []repairCase{
		{name: "pack header", repair: repair.Packs, damage: flipped(func([]byte, []index.Entry) int { return 3 })},
		{name: "pack trailer", repair: repair.Packs, damage: flipped(func(raw []byte, _ []index.Entry) int { return repotest.SealedTail(raw) })},
		{name: "pack tail", repair: repair.Packs, damage: flipped(func(raw []byte, _ []index.Entry) int { return len(raw) - 3 })},
		{name: "chunk blob", repair: repair.Packs, damage: func(t *testing.T, f *repotest.TwoSources, _ map[id.ID][]repotest.Use) expect {
			p, entries := bPack(t, f)
			victim := entries[4]
			f.Flip(t, pack.ObjectName(p), int(victim.Offset)+20)
			aside := movedAside(pack.ObjectName(p))
			return expect{lost: []id.ID{victim.ID}, dropped: 1, kept: int64(len(entries) - 1), check: func(t *testing.T, f *repotest.TwoSources) {
				aside(t, f)
				// The broken copy is gone with its pack: the record keeps
				// the chunk lost, without a place, until a backup
				// stores it again.
				d := f.R.Damage()
				if len(d) != 1 || d[0].Chunk != victim.ID || d[0].Pack != (pack.ID{}) {
					t.Errorf("damage record %+v, want chunk %s without a place", d, victim.ID.Short())
				}
				if lost, err := f.R.LostChunks(context.Background()); err != nil || !lost[victim.ID] || len(lost) != 1 {
					t.Errorf("lost chunks %v (%v), want %s", lost, err, victim.ID.Short())
				}
			}}
		}},
		{name: "pack cut short", repair: repair.Packs, damage: func(t *testing.T, f *repotest.TwoSources, _ map[id.ID][]repotest.Use) expect {
			p, entries := bPack(t, f)
			f.Truncate(t, pack.ObjectName(p), int64(entries[9].Offset)+int64(entries[9].Length)/2)
			return expect{lost: chunksOf(entries[9:]), dropped: int64(len(entries) - 9), kept: 9, check: movedAside(pack.ObjectName(p))}
		}},
	}
}

func indexCases() []repairCase {
	seg := func(f *repotest.TwoSources) string { return index.ObjectName(f.BSegment) }
	return []repairCase{
		{name: "index segment block", repair: repair.Index, damage: func(t *testing.T, f *repotest.TwoSources, _ map[id.ID][]repotest.Use) expect {
			f.Flip(t, seg(f), 16+40)
			return expect{kept: -1}
		}},
		{name: "index segment footer", reopen: true, repair: repair.Index, damage: func(t *testing.T, f *repotest.TwoSources, _ map[id.ID][]repotest.Use) expect {
			f.Flip(t, seg(f), repotest.SealedTail(f.Read(t, seg(f))))
			return expect{kept: -1}
		}},
		{name: "index segment deleted", reopen: true, repair: repair.Index, damage: func(t *testing.T, f *repotest.TwoSources, _ map[id.ID][]repotest.Use) expect {
			f.Remove(t, seg(f))
			return expect{kept: -1}
		}},
		{name: "pack deleted", repair: repair.Index, damage: func(t *testing.T, f *repotest.TwoSources, _ map[id.ID][]repotest.Use) expect {
			p, entries := bPack(t, f)
			f.Remove(t, pack.ObjectName(p))
			return expect{lost: chunksOf(entries), dropped: int64(len(entries)), kept: -1}
		}},
		{name: "pack trailer and a chunk blob", repair: repair.Index, damage: func(t *testing.T, f *repotest.TwoSources, _ map[id.ID][]repotest.Use) expect {
			// The trailer cannot say what the pack holds: the index's
			// entries whose blobs authenticate are kept, the other not.
			p, entries := bPack(t, f)
			name := pack.ObjectName(p)
			f.Flip(t, name, repotest.SealedTail(f.Read(t, name)))
			f.Flip(t, name, int(entries[3].Offset)+20)
			return expect{lost: []id.ID{entries[3].ID}, dropped: 1, kept: -1, remains: []string{"pack-trailer"}}
		}},
	}
}

func snapshotCases() []repairCase {
	bMap := func(f *repotest.TwoSources) string { return f.B.Disks[0].Map }
	bManifest := func(f *repotest.TwoSources) string { return "snapshots/" + f.B.ID.String() }
	return []repairCase{
		{name: "disk map header", repair: repair.Snapshots, damage: func(t *testing.T, f *repotest.TwoSources, _ map[id.ID][]repotest.Use) expect {
			before := bIDs(t, f)
			f.Flip(t, bMap(f), 3)
			return expect{kept: spans(f.B.Disks[0]), check: keepsSpans(bMap(f), before, 0, true)}
		}},
		{name: "disk map second block", bSpans: diskmap.BlockIDs + 200, repair: repair.Snapshots, damage: func(t *testing.T, f *repotest.TwoSources, _ map[id.ID][]repotest.Use) expect {
			before := bIDs(t, f)
			f.Flip(t, bMap(f), repotest.BeforeTail(f.Read(t, bMap(f))))
			d := f.B.Disks[0]
			lost := spans(d) - diskmap.BlockIDs
			return expect{dropped: lost, kept: diskmap.BlockIDs, check: keepsSpans(bMap(f), before, lost, true),
				affects: []repair.Affected{{Snapshot: f.B.ID.Short(), Source: f.B.Source.VMName, Disk: d.Name, Spans: lost}}}
		}},
		{name: "disk map deleted", repair: repair.Snapshots, damage: func(t *testing.T, f *repotest.TwoSources, _ map[id.ID][]repotest.Use) expect {
			before := bIDs(t, f)
			f.Remove(t, bMap(f))
			d := f.B.Disks[0]
			return expect{dropped: spans(d), kept: 0, check: keepsSpans(bMap(f), before, spans(d), false),
				affects: []repair.Affected{{Snapshot: f.B.ID.Short(), Source: f.B.Source.VMName, Disk: d.Name, Spans: spans(d)}}}
		}},
		{name: "manifest header", repair: repair.Snapshots, damage: func(t *testing.T, f *repotest.TwoSources, _ map[id.ID][]repotest.Use) expect {
			f.Flip(t, bManifest(f), 3)
			return expect{check: func(t *testing.T, f *repotest.TwoSources) {
				s, err := f.R.LoadPoint(context.Background(), f.B.ID)
				if err != nil || s.HeaderDamaged() != nil || s.Disks[0].Map != bMap(f) {
					t.Errorf("B after the repair: %v, %+v", err, s)
				}
			}}
		}},
		{name: "manifest body", repair: repair.Snapshots, damage: func(t *testing.T, f *repotest.TwoSources, _ map[id.ID][]repotest.Use) expect {
			f.Flip(t, bManifest(f), 40)
			aside := movedAside(bManifest(f))
			return expect{check: func(t *testing.T, f *repotest.TwoSources) {
				aside(t, f)
				recovered(bMap(f))(t, f)
			}}
		}},
		{name: "manifest deleted", repair: repair.Snapshots, damage: func(t *testing.T, f *repotest.TwoSources, _ map[id.ID][]repotest.Use) expect {
			f.Remove(t, bManifest(f))
			return expect{check: recovered(bMap(f))}
		}},
	}
}

// keepsSpans checks B's disk after repair snapshots: a new disk map (the
// old one moved aside if it was there) holding every span that could be read, the first
// ones, and the last lost ones marked lost, counted in the manifest.
func keepsSpans(old string, before []id.ID, lost int64, aside bool) func(t *testing.T, f *repotest.TwoSources) {
	return func(t *testing.T, f *repotest.TwoSources) {
		ctx := context.Background()
		if aside {
			movedAside(old)(t, f)
		} else if _, err := f.R.Store().Stat(ctx, old); err == nil {
			t.Errorf("the damaged map %s is still in place", old)
		}
		s, err := f.R.LoadPoint(ctx, f.B.ID)
		if err != nil {
			t.Fatal(err)
		}
		d := s.Disks[0]
		if d.Map == old || d.LostSpans != lost || lost > 0 && len(s.Warnings) == 0 {
			t.Errorf("B's disk after the repair: %+v, warnings %q; want a new map with %d span(s) lost", d, s.Warnings, lost)
		}
		m, err := f.R.OpenDiskMap(ctx, d.Map)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := m.All(ctx)
		if err != nil {
			t.Fatal(err)
		}
		keep := int64(len(ids)) - lost
		for i, x := range ids {
			if int64(i) >= keep && x != repo.LostChunk {
				t.Fatalf("span %d of %d is not marked lost", i, len(ids))
			}
			if int64(i) < keep && x != before[i] {
				t.Fatalf("span %d holds another chunk than before", i)
			}
		}
	}
}

// bIDs reads B's disk map.
func bIDs(t *testing.T, f *repotest.TwoSources) []id.ID {
	ctx := context.Background()
	m, err := f.R.OpenDiskMap(ctx, f.B.Disks[0].Map)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := m.All(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// recovered checks that a point was made of B's disk map, whose manifest
// is gone.
func recovered(bMap string) func(t *testing.T, f *repotest.TwoSources) {
	return func(t *testing.T, f *repotest.TwoSources) {
		for _, s := range f.Points(t) {
			if s.Source.Kind == "recovered" && len(s.Disks) == 1 && s.Disks[0].Map == bMap && s.Disks[0].Size == f.B.Disks[0].Size {
				return
			}
		}
		t.Errorf("no point was recovered from %s", bMap)
	}
}

// TestEachRepair damages one object of B's in each way verify tells
// apart and runs the repair verify recommends for it.
func TestEachRepair(t *testing.T) {
	cases := append(append(packCases(), indexCases()...), snapshotCases()...)
	templates := map[int]*repotest.TwoSources{}
	for _, c := range cases {
		if templates[c.bSpans] == nil {
			templates[c.bSpans] = repotest.NewTwoSources(t, c.bSpans)
		}
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := templates[c.bSpans].Clone(t)
			uses := repotest.Uses(t, f.R)
			want := c.damage(t, f, uses)
			if c.reopen {
				f.Reopen(t)
			}
			exercise(t, f, uses, c.repair, want)
		})
	}
}
