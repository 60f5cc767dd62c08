package repair_test

import (
	"context"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/repo/repair"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/repo/verify"
	"github.com/coffer-backup/coffer/internal/store"
)

// TestIntactRepositoryIsLeftAlone: repair packs and repair snapshots find
// nothing to do in an intact repository and change no byte of it.
func TestIntactRepositoryIsLeftAlone(t *testing.T) {
	ctx := context.Background()
	f := repotest.NewTwoSources(t, 0)
	files := f.Files(t)
	for name, fix := range map[string]repairFunc{"packs": repair.Packs, "snapshots": repair.Snapshots} {
		for _, dry := range []bool{true, false} {
			rep, err := fix(ctx, f.R, repair.Options{DryRun: dry, TempDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.Steps) != 1 || !strings.Contains(rep.Steps[0], "nothing to do") && !strings.Contains(rep.Steps[0], "no damaged pack") ||
				rep.Kept != 0 || rep.Dropped != 0 || len(rep.Affected) != 0 {
				t.Errorf("repair %s (dry run %v) of an intact repository: %+v", name, dry, rep)
			}
		}
	}
	repotest.SameFiles(t, "repairs of an intact repository", files, f.Files(t))
}

// TestRepairPacksWaits: repair packs refuses to run beside a half-done
// garbage collection and over a damaged index (repair index comes first,
// as verify says), and then changes nothing.
func TestRepairPacksWaits(t *testing.T) {
	ctx := context.Background()
	t.Run("gc plan", func(t *testing.T) {
		f := repotest.NewTwoSources(t, 0)
		f.Flip(t, pack.ObjectName(f.BPacks[0]), 3)
		if _, err := store.Put(ctx, f.R.Store(), "gc/plan", []byte("plan"), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		files := f.Files(t)
		if _, err := repair.Packs(ctx, f.R, repair.Options{TempDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "coffer gc") {
			t.Fatalf("repair packs beside a gc plan: %v", err)
		}
		repotest.SameFiles(t, "the refused repair", files, f.Files(t))
	})
	t.Run("damaged index", func(t *testing.T) {
		f := repotest.NewTwoSources(t, 0)
		f.Flip(t, pack.ObjectName(f.BPacks[0]), 3)
		seg := index.ObjectName(f.BSegment)
		f.Flip(t, seg, repotest.SealedTail(f.Read(t, seg)))
		r := f.Reopen(t)
		files := f.Files(t)
		if _, err := repair.Packs(ctx, r, repair.Options{TempDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "repair index") {
			t.Fatalf("repair packs over a damaged index: %v", err)
		}
		repotest.SameFiles(t, "the refused repair", files, f.Files(t))
	})
}

// TestRepairsInTheOrderVerifySays: damage of every kind at once, mended
// by running the repairs verify recommends in its order. Afterwards
// verify finds only the chunks that are gone (they come back from the
// source), lost by exactly the points that lost them before, and every
// point and chunk that was intact before still is.
func TestRepairsInTheOrderVerifySays(t *testing.T) {
	ctx := context.Background()
	f := repotest.NewTwoSources(t, 0)
	uses := repotest.Uses(t, f.R)
	gone := repotest.Entries(t, f.R, f.BPacks[0])
	f.Remove(t, pack.ObjectName(f.BPacks[0]))
	rotten := repotest.Entries(t, f.R, f.BPacks[2])[5]
	f.Flip(t, pack.ObjectName(f.BPacks[2]), int(rotten.Offset)+20)
	f.Flip(t, pack.ObjectName(f.BPacks[3]), 3)
	f.Flip(t, index.ObjectName(f.BSegment), 16+40)
	f.Flip(t, f.A[1].Disks[1].Map, 3)
	f.Flip(t, "snapshots/"+f.A[2].ID.String(), 3)

	before := observe(t, f.R, uses, verify.Options{})
	steps := map[string]repairFunc{
		"coffer repair index": repair.Index, "coffer repair packs": repair.Packs, "coffer repair snapshots": repair.Snapshots,
	}
	// Verify reads the packs the index locates: what lies behind a damaged
	// index shows once it is rebuilt, so a second round mends the rest.
	ran := map[string]bool{}
	for round, v := 0, before; ; round++ {
		todo := 0
		for _, step := range v.report.Repairs {
			if fix := steps[step]; fix != nil {
				if _, err := fix(ctx, f.R, repair.Options{TempDir: t.TempDir()}); err != nil {
					t.Fatalf("%s: %v", step, err)
				}
				ran[step] = true
				todo++
			}
		}
		if todo == 0 {
			break
		}
		if round == 2 {
			t.Fatalf("verify still recommends %q after three rounds", v.report.Repairs)
		}
		v = observe(t, f.Reopen(t), uses, verify.Options{})
	}
	if len(ran) != 3 {
		t.Fatalf("ran %v", ran)
	}
	after := observe(t, f.Reopen(t), uses, verify.Options{NoRecord: true})
	for _, p := range after.report.Problems {
		if !p.DataLoss || p.Kind != "missing-chunk" {
			t.Errorf("after the repairs: %s %s (loss %v): %s", p.Kind, p.Object, p.DataLoss, p.Detail)
		}
	}
	if len(after.report.Damaged) != 1 || after.report.Damaged[0].Snapshot != f.B.ID.Short() {
		t.Errorf("damaged points after the repairs %+v; want B's alone", after.report.Damaged)
	}
	for _, e := range append(gone, rotten) {
		if after.readable[e.ID] {
			t.Errorf("chunk %s is readable though its only copy is gone", e.ID.Short())
		}
	}
	for x := range before.readable {
		if !after.readable[x] {
			t.Errorf("chunk %s was readable before the repairs and is not after", x.Short())
		}
	}
	if len(after.readable) != len(uses)-len(gone)-1 {
		t.Errorf("%d of %d chunks readable after the repairs, want all but %d", len(after.readable), len(uses), len(gone)+1)
	}
	if after.report.Intact != 3 {
		t.Errorf("%d points intact, want A's 3", after.report.Intact)
	}
}
