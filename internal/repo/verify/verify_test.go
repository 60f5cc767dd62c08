package verify_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/repo/verify"
	"github.com/coffer-backup/coffer/internal/store"
)

const (
	repairPacks     = "coffer repair packs"
	repairIndex     = "coffer repair index"
	repairSnapshots = "coffer repair snapshots"
	healByBackup    = "back up the affected VMs" // the start of verify's advice
)

// finding is a problem verify must report. For data loss, lost are the
// chunks without a readable copy, from which the affected points, disks
// and offsets follow (computed from the disk maps), or affects says them
// outright (a damaged disk map).
type finding struct {
	kind, object string
	dataLoss     bool
	repair       string
	lost         []id.ID
	affects      []verify.Affected
}

func (w finding) String() string {
	return fmt.Sprintf("%s %s loss=%v", w.kind, w.object, w.dataLoss)
}

func run(t *testing.T, r *repo.Repository, o verify.Options) *verify.Report {
	t.Helper()
	o.TempDir = t.TempDir()
	rep, err := verify.Run(context.Background(), r, o)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// affected is what verify must say of the lost chunks: per disk of every
// point that uses one, the first damaged offset and the spans lost.
func affected(uses map[id.ID][]repotest.Use, lost []id.ID) []verify.Affected {
	out := []verify.Affected{}
	for _, l := range repotest.LostSpans(uses, lost) {
		out = append(out, verify.Affected{Snapshot: l.Point, Source: l.VM, Disk: l.Disk, Offset: l.Offset, Spans: l.Spans})
	}
	return out
}

func sortAffected(list []verify.Affected) {
	sort.Slice(list, func(i, j int) bool {
		return list[i].Snapshot+"/"+list[i].Disk < list[j].Snapshot+"/"+list[j].Disk
	})
}

// check compares a report with the findings it must hold, and nothing
// else: the same problems (kind, object, severity, repair), the same
// points, disks and offsets lost, every other point intact, and the
// repairs to run.
func check(t *testing.T, rep *verify.Report, uses map[id.ID][]repotest.Use, want []finding) {
	t.Helper()
	var got, exp []string
	for _, p := range rep.Problems {
		got = append(got, fmt.Sprintf("%s %s loss=%v", p.Kind, p.Object, p.DataLoss))
	}
	for _, w := range want {
		exp = append(exp, w.String())
	}
	sort.Strings(got)
	sort.Strings(exp)
	if !slices.Equal(got, exp) {
		t.Fatalf("verify reports\n  %s\nwant\n  %s\n(problems %+v)", strings.Join(got, "\n  "), strings.Join(exp, "\n  "), rep.Problems)
	}
	damaged := map[string]bool{}
	for _, w := range want {
		i := slices.IndexFunc(rep.Problems, func(p verify.Problem) bool {
			return p.Kind == w.kind && p.Object == w.object && p.DataLoss == w.dataLoss
		})
		p := rep.Problems[i]
		if p.Repair != w.repair {
			t.Errorf("%s: repair %q, want %q", w, p.Repair, w.repair)
		}
		if !slices.Contains(rep.Repairs, w.repair) {
			t.Errorf("%s: the repairs %q leave out %q", w, rep.Repairs, w.repair)
		}
		want := w.affects
		if w.lost != nil {
			want = affected(uses, w.lost)
		}
		got := slices.Clone(p.Affects)
		sortAffected(got)
		if len(want) == 0 {
			want = nil
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s affects\n  %+v\nwant\n  %+v", w, got, want)
		}
		if w.dataLoss != (len(want) > 0) {
			t.Errorf("%s: data loss %v but affects %+v", w, w.dataLoss, want)
		}
		for _, a := range want {
			damaged[a.Snapshot] = true
		}
	}
	var gotDamaged []string
	for _, d := range rep.Damaged {
		gotDamaged = append(gotDamaged, d.Snapshot)
	}
	var wantDamaged []string
	for s := range damaged {
		wantDamaged = append(wantDamaged, s)
	}
	sort.Strings(wantDamaged)
	if !slices.Equal(gotDamaged, wantDamaged) {
		t.Errorf("damaged points %v, want %v", gotDamaged, wantDamaged)
	}
	if rep.Intact != rep.Snapshots-len(wantDamaged) {
		t.Errorf("%d of %d points intact, want %d", rep.Intact, rep.Snapshots, rep.Snapshots-len(wantDamaged))
	}
	heal := slices.ContainsFunc(rep.Repairs, func(s string) bool { return strings.HasPrefix(s, healByBackup) })
	wantHeal := slices.ContainsFunc(want, func(w finding) bool { return w.dataLoss && w.kind != "disk-map" })
	if heal != wantHeal {
		t.Errorf("repairs %q: advice to back up again %v, want %v", rep.Repairs, heal, wantHeal)
	}
	if rep.OK() != (len(want) == 0) {
		t.Errorf("OK() = %v with %d findings", rep.OK(), len(want))
	}
}

func chunksOf(entries []index.Entry) []id.ID {
	var out []id.ID
	for _, e := range entries {
		out = append(out, e.ID)
	}
	return out
}

// TestCleanRepository: a repository nothing happened to verifies clean,
// structurally and reading every chunk, and every point is intact.
func TestCleanRepository(t *testing.T) {
	f := repotest.NewTwoSources(t, 200)
	for _, readData := range []bool{false, true} {
		rep := run(t, f.R, verify.Options{ReadData: readData})
		check(t, rep, nil, nil)
		if rep.Snapshots != 4 || rep.Intact != 4 || rep.Disks != 7 || rep.Recorded != 0 || len(rep.Notices) != 0 {
			t.Fatalf("read data %v: %+v", readData, rep)
		}
		if readData && (rep.PacksRead != rep.Packs || rep.ChunksRead == 0) {
			t.Fatalf("read %d of %d packs, %d chunks", rep.PacksRead, rep.Packs, rep.ChunksRead)
		}
	}
}

// TestReadDataRecordsBrokenCopies: bit rot inside a pack is invisible to
// the structural check; verify --read-data finds it and records the broken
// copy with the points that used it, so that from then on the structural
// check reports the loss as well, and a second verify records nothing
// again. A check with NoRecord changes no file of the repository.
func TestReadDataRecordsBrokenCopies(t *testing.T) {
	ctx := context.Background()
	f := repotest.NewTwoSources(t, 0)
	uses := repotest.Uses(t, f.R)
	p := f.BPacks[0]
	entries := repotest.Entries(t, f.R, p)
	victim := entries[len(entries)-1]
	f.Flip(t, pack.ObjectName(p), int(victim.Offset)+int(victim.Length)/2)
	want := []finding{{kind: "corrupt-chunk", object: pack.ObjectName(p), dataLoss: true, repair: repairPacks, lost: []id.ID{victim.ID}}}

	before := f.Files(t)
	check(t, run(t, f.R, verify.Options{}), uses, nil)
	check(t, run(t, f.R, verify.Options{ReadData: true, NoRecord: true}), uses, want)
	repotest.SameFiles(t, "verify without recording", before, f.Files(t))

	rep := run(t, f.R, verify.Options{ReadData: true})
	check(t, rep, uses, want)
	if rep.Recorded != 1 {
		t.Fatalf("recorded %d broken copies, want 1", rep.Recorded)
	}
	r := f.Reopen(t)
	d := r.Damage()
	if len(d) != 1 || d[0].Chunk != victim.ID || d[0].Pack != p || d[0].Offset != victim.Offset || !slices.Equal(d[0].Points, []string{f.B.ID.Short()}) {
		t.Fatalf("damage record %+v, want chunk %s at %s+%d used by %s", d, victim.ID.Short(), p, victim.Offset, f.B.ID.Short())
	}
	if _, err := r.Locate(ctx, victim.ID); err == nil {
		t.Fatal("the recorded broken copy is still located")
	}
	// Now the structural check knows it too.
	check(t, run(t, r, verify.Options{}), uses, want)
	if rep := run(t, r, verify.Options{ReadData: true}); rep.Recorded != 0 {
		t.Fatalf("a second verify recorded %d copies again", rep.Recorded)
	} else {
		check(t, rep, uses, want)
	}
}

// TestSubsetsReadEveryPackOnce: the subsets n/m of a rotation read every
// pack exactly once over n = 1..m. Every pack gets a broken blob, so the
// packs a subset read are the ones it reports.
func TestSubsetsReadEveryPackOnce(t *testing.T) {
	f := repotest.NewTwoSources(t, 0)
	var all []string
	for _, p := range packs(t, f.R) {
		e := repotest.Entries(t, f.R, p)[0]
		f.Flip(t, pack.ObjectName(p), int(e.Offset)+int(e.Length)/2)
		all = append(all, pack.ObjectName(p))
	}
	for _, m := range []int{1, 3, 7} {
		var seen []string
		read := 0
		for n := 1; n <= m; n++ {
			progress := &verify.Progress{}
			rep := run(t, f.R, verify.Options{ReadData: true, NoRecord: true, SubsetNum: n, SubsetDen: m, Progress: progress})
			read += rep.PacksRead
			if rep.Packs != len(all) || progress.PacksDone.Load() != int64(rep.PacksRead) {
				t.Fatalf("subset %d/%d: %d packs, %d read, progress %d", n, m, rep.Packs, rep.PacksRead, progress.PacksDone.Load())
			}
			for _, p := range rep.Problems {
				if p.Kind != "corrupt-chunk" {
					t.Fatalf("subset %d/%d: %+v", n, m, p)
				}
				seen = append(seen, p.Object)
			}
		}
		sort.Strings(seen)
		sort.Strings(all)
		if read != len(all) || !slices.Equal(seen, all) {
			t.Fatalf("subsets of %d read %d packs and found damage in %d (%v), want each of the %d packs once", m, read, len(seen), seen, len(all))
		}
	}
	for _, pct := range []float64{0, 100} {
		if rep := run(t, f.R, verify.Options{ReadData: true, NoRecord: true, SubsetPercent: pct}); rep.PacksRead != len(all) {
			t.Fatalf("%v%% read %d of %d packs", pct, rep.PacksRead, len(all))
		}
	}
}

// packs lists the repository's packs.
func packs(t *testing.T, r *repo.Repository) []pack.ID {
	var out []pack.ID
	if err := r.Store().List(context.Background(), "data/", func(fi store.ObjectInfo) error {
		p, err := pack.ParseObjectName(fi.Name)
		if err == nil {
			out = append(out, p)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReadDataBehindADamagedIndex: when the index entries of a pack are
// unreadable, verify --read-data still finds its chunks through the
// pack's trailer, and it must authenticate them before it says that no
// data is lost: a rotten blob there is a loss of the points that use it.
func TestReadDataBehindADamagedIndex(t *testing.T) {
	f := repotest.NewTwoSources(t, 0)
	uses := repotest.Uses(t, f.R)
	p := f.BPacks[1]
	entries := repotest.Entries(t, f.R, p)
	f.Flip(t, pack.ObjectName(p), int(entries[3].Offset)+20)
	seg := index.ObjectName(f.BSegment) // B's index entries: one block
	f.Flip(t, seg, 16+40)
	rep := run(t, f.R, verify.Options{ReadData: true})
	check(t, rep, uses, []finding{
		{kind: "index-segment", object: seg, repair: repairIndex},
		{kind: "corrupt-chunk", object: pack.ObjectName(p), dataLoss: true, repair: repairPacks, lost: []id.ID{entries[3].ID}},
	})
	if rep.Recorded != 1 {
		t.Errorf("recorded %d broken copies, want 1", rep.Recorded)
	}
	// The structural check does not read blobs: it sees the damaged index
	// (and, now, the recorded broken copy).
	check(t, run(t, f.R, verify.Options{NoRecord: true}), uses, []finding{
		{kind: "index-segment", object: seg, repair: repairIndex},
		{kind: "corrupt-chunk", object: pack.ObjectName(p), dataLoss: true, repair: repairPacks, lost: []id.ID{entries[3].ID}},
	})
}
