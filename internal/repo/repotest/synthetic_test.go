package repotest_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/diskmap"
	"github.com/coffer-backup/coffer/internal/repo/gc"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/repo/verify"
	"github.com/coffer-backup/coffer/internal/restore"
)

// checkRestores restores every disk of every point and compares it span by
// span with what the description says it holds.
func checkRestores(t *testing.T, r *repo.Repository, s repotest.Synthetic, snaps []*repo.Point, first int) {
	t.Helper()
	ctx := context.Background()
	cs := r.Config().ChunkSize
	want := make([]byte, cs)
	for k, snap := range snaps {
		for d, disk := range snap.Disks {
			out := filepath.Join(t.TempDir(), "disk")
			if _, err := restore.ToFile(ctx, r, snap, disk, out, restore.FileOptions{}); err != nil {
				t.Fatalf("restore point %d disk %d: %v", first+k, d, err)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != s.Spans()*cs {
				t.Fatalf("point %d disk %d restores %d bytes, want %d", first+k, d, len(got), s.Spans()*cs)
			}
			for i := range s.Spans() {
				if !bytes.Equal(got[i*cs:(i+1)*cs], s.Span(want, first+k, d, i)) {
					t.Fatalf("point %d disk %d span %d restores other bytes than generated", first+k, d, i)
				}
			}
		}
	}
}

func mustVerify(t *testing.T, r *repo.Repository) {
	t.Helper()
	rep, err := verify.Run(context.Background(), r, verify.Options{ReadData: true})
	if err != nil || !rep.OK() {
		t.Fatalf("verify --read-data: %v %+v", err, rep)
	}
}

// TestSyntheticRepositoryIsValid: a generated repository verifies with
// every chunk read and re-hashed, restores what it describes, has the
// references and chunks its statistics claim, and survives gc after older
// points are forgotten.
func TestSyntheticRepositoryIsValid(t *testing.T) {
	ctx := context.Background()
	r := repotest.New(t, repo.InitOptions{ChunkSize: 64 << 10})
	s := repotest.Synthetic{Points: 6, Disks: 2, References: 3000, ChangeRate: 0.2, ChunksPerPack: 16, Seed: 7}
	stats, err := s.Generate(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	snaps, err := r.Points(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 6 || len(snaps[0].Disks) != 2 {
		t.Fatalf("%d points of %d disks, want 6 of 2", len(snaps), len(snaps[0].Disks))
	}
	refs, distinct := int64(0), map[id.ID]bool{}
	for _, snap := range snaps {
		for _, d := range snap.Disks {
			m, err := diskmap.Open(ctx, r.Store(), r.Key(), d.Map)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Iterate(ctx, func(_ uint64, x id.ID) error {
				if !x.IsZero() {
					refs++
					distinct[x] = true
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if stats.References != refs || stats.Chunks != int64(len(distinct)) || refs < 2800 || refs > 3200 {
		t.Fatalf("statistics %+v; the disk maps hold %d references to %d chunks (asked for about 3000)", stats, refs, len(distinct))
	}
	if stats.Chunks <= int64(stats.Spans*2) || stats.Packs < stats.Chunks/16 {
		t.Fatalf("statistics %+v: later points rewrote nothing, or packs are not filled as asked", stats)
	}
	mustVerify(t, r)
	checkRestores(t, r, s, snaps, 0)

	for _, old := range snaps[:3] {
		if err := r.DeletePoint(ctx, old); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := gc.Run(ctx, r, gc.Options{MemoryBudget: 1 << 10, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.PacksPlanned == 0 || rep.PacksDeleted+rep.PacksRepacked == 0 {
		t.Fatalf("gc found nothing to collect after 3 of 6 points were forgotten: %+v", rep)
	}
	if err := r.ReloadIndex(ctx); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, r)
	checkRestores(t, r, s, snaps[3:], 3)
}
