package repair_test

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
	"github.com/coffer-backup/coffer/internal/repo/repair"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/repo/verify"
)

type repairFunc func(context.Context, *repo.Repository, repair.Options) (*repair.Report, error)

// expect is what a repair must do with one kind of damage.
type expect struct {
	// lost are the chunks that were unreadable and that the repair
	// drops; the affected points and disks follow from them. affects
	// says them outright for lost disk map spans.
	lost    []id.ID
	affects []repair.Affected
	dropped int64
	kept    int64 // -1: not checked
	// remains are the kinds of metadata damage the repair leaves to
	// another repair.
	remains []string
	// check looks at what is particular to the case, after the repair.
	check func(t *testing.T, f *repotest.TwoSources)
}

// state is what is true of a repository before and after a repair.
type state struct {
	report   *verify.Report
	intact   []string // short IDs of the points verify calls intact
	readable map[id.ID]bool
}

func observe(t *testing.T, r *repo.Repository, uses map[id.ID][]repotest.Use, o verify.Options) state {
	t.Helper()
	ctx := context.Background()
	o.ReadData, o.TempDir = true, t.TempDir()
	rep, err := verify.Run(ctx, r, o)
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := r.Points(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := state{report: rep, readable: repotest.Readable(t, r, uses)}
	for _, p := range snaps {
		if !slices.ContainsFunc(rep.Damaged, func(d verify.DamagedPoint) bool { return d.Snapshot == p.ID.Short() }) {
			s.intact = append(s.intact, p.ID.Short())
		}
	}
	return s
}

// affected is what a repair must say of the lost chunks: per disk of
// every point that uses one, the spans lost.
func affected(uses map[id.ID][]repotest.Use, lost []id.ID) []repair.Affected {
	var out []repair.Affected
	for _, l := range repotest.LostSpans(uses, lost) {
		out = append(out, repair.Affected{Snapshot: l.Point, Source: l.VM, Disk: l.Disk, Spans: l.Spans})
	}
	return out
}

func sortAffected(list []repair.Affected) {
	sort.Slice(list, func(i, j int) bool {
		return list[i].Snapshot+"/"+list[i].Disk < list[j].Snapshot+"/"+list[j].Disk
	})
}

// exercise runs one repair on a damaged repository and checks its
// promises: the dry run changes no byte and plans exactly what the real
// run then does; the real run mends what it says (verify --read-data
// finds no damage of its kind left), drops only what was unreadable and
// names the points that lost it; no chunk readable before and no point
// intact before is lost; running it again changes nothing.
func exercise(t *testing.T, f *repotest.TwoSources, uses map[id.ID][]repotest.Use, fix repairFunc, want expect) (dry, done *repair.Report) {
	t.Helper()
	ctx := context.Background()
	// verify first, as a user does: it records broken copies, which
	// repair packs reads.
	before := observe(t, f.R, uses, verify.Options{})
	files := f.Files(t)
	dry, err := fix(ctx, f.R, repair.Options{DryRun: true, TempDir: t.TempDir()})
	if err != nil {
		t.Fatalf("dry run: %v", err)
	}
	repotest.SameFiles(t, "the dry run", files, f.Files(t))
	done, err = fix(ctx, f.R, repair.Options{TempDir: t.TempDir()})
	if err != nil {
		t.Fatalf("repair: %v", err)
	}
	if !slices.Equal(dry.Steps, done.Steps) || dry.Dropped != done.Dropped || !slices.Equal(dry.Affected, done.Affected) || done.DryRun || !dry.DryRun {
		t.Errorf("the dry run planned\n  %+v\nthe repair did\n  %+v", dry, done)
	}
	wantAffects := want.affects
	if want.lost != nil {
		wantAffects = affected(uses, want.lost)
	}
	gotAffects := slices.Clone(done.Affected)
	sortAffected(gotAffects)
	if done.Dropped != want.dropped || !slices.Equal(gotAffects, wantAffects) || want.kept >= 0 && done.Kept != want.kept {
		t.Errorf("repair kept %d, dropped %d, affected %+v; want kept %d, dropped %d, affected %+v\n(steps %q)",
			done.Kept, done.Dropped, gotAffects, want.kept, want.dropped, wantAffects, done.Steps)
	}

	r := f.Reopen(t)
	after := observe(t, r, uses, verify.Options{NoRecord: true})
	for _, p := range after.report.Problems {
		if !p.DataLoss && !slices.Contains(want.remains, p.Kind) {
			t.Errorf("after the repair verify still finds %s %s: %s", p.Kind, p.Object, p.Detail)
		}
	}
	for _, p := range before.intact {
		if !slices.Contains(after.intact, p) {
			t.Errorf("point %s was intact before the repair and is not after (damaged %+v)", p, after.report.Damaged)
		}
	}
	for x := range before.readable {
		if !after.readable[x] {
			t.Errorf("chunk %s was readable before the repair and is not after", x.Short())
		}
	}
	if want.check != nil {
		want.check(t, f)
	}
	// Once more: nothing left to do.
	files = f.Files(t)
	entries := indexEntries(t, r)
	again, err := fix(ctx, r, repair.Options{TempDir: t.TempDir()})
	if err != nil {
		t.Fatalf("repair again: %v", err)
	}
	if again.Dropped != 0 || len(again.Affected) != 0 {
		t.Errorf("the second repair dropped %d, affected %+v", again.Dropped, again.Affected)
	}
	if !slices.Equal(entries, indexEntries(t, r)) {
		t.Errorf("the second repair changed the index")
	}
	if !rebuildsAlways(again) {
		repotest.SameFiles(t, "the second repair", files, f.Files(t))
	}
	return dry, done
}

// rebuildsAlways tells repair index, which writes the index anew however
// intact it is, from the repairs that leave an intact repository alone.
func rebuildsAlways(rep *repair.Report) bool {
	return slices.ContainsFunc(rep.Steps, func(s string) bool { return strings.HasPrefix(s, "write one index segment") })
}

// indexEntries lists every index entry, as text, in order.
func indexEntries(t *testing.T, r *repo.Repository) []string {
	t.Helper()
	var out []string
	if err := r.Index().Iterate(context.Background(), func(e index.Entry) error {
		out = append(out, fmt.Sprintf("%s %s %d %d %d", e.ID, e.Pack, e.Offset, e.Length, e.RawLength))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func chunksOf(entries []index.Entry) []id.ID {
	var out []id.ID
	for _, e := range entries {
		out = append(out, e.ID)
	}
	return out
}
