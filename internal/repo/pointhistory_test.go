package repo

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/store"
)

// TestHistoryPointsReadsOnlyWhatChanged: HistoryPoints returns what
// Points returns, every time, while reading again only the manifests
// committed, rewritten or damaged since its last call (by this process
// or another), and forgetting those deleted.
func TestHistoryPointsReadsOnlyWhatChanged(t *testing.T) {
	r, st := newTestRepo(t, Options{})
	ctx := context.Background()
	other, err := Open(ctx, st, []byte("pw"), Options{}) // another process's handle
	if err != nil {
		t.Fatal(err)
	}
	base := time.Now().UTC().Truncate(time.Second)
	save := func(w *Repository, n int) *Point {
		t.Helper()
		s := &Point{ID: id.Random(), Time: base.Add(time.Duration(n) * time.Minute), Source: Source{Kind: "disk", VMName: "v"},
			Mode: "full", Disks: []Disk{{Key: "0", Name: "d", Size: 10, ChunkSize: 1 << 20, Map: "maps/x"}}}
		if err := w.saveSnapshot(ctx, s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	// history checks HistoryPoints against Points and returns it.
	history := func() []*Point {
		t.Helper()
		got, err := r.HistoryPoints(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want, err := r.Points(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("HistoryPoints: %d points, Points %d", len(got), len(want))
		}
		for i := range got {
			if got[i].ID != want[i].ID || got[i].Protected != want[i].Protected || !got[i].Time.Equal(want[i].Time) {
				t.Fatalf("point %d: HistoryPoints %s (protected %v), Points %s (protected %v)", i, got[i].ID.Short(), got[i].Protected,
					want[i].ID.Short(), want[i].Protected)
			}
		}
		return got
	}
	p1, p2 := save(other, 2), save(other, 1)
	first := history()
	if first[0].ID != p2.ID || first[1].ID != p1.ID {
		t.Fatal("not oldest first")
	}
	p3 := save(other, 3)
	second := history()
	if second[0] != first[0] || second[1] != first[1] || second[2].ID != p3.ID {
		t.Fatal("the manifests read before were read again, or the new one is missing")
	}

	// A rewrite by another process is read again; by this one too.
	p1.Protected = true
	if err := other.UpdatePoint(ctx, p1); err != nil {
		t.Fatal(err)
	}
	third := history()
	if third[1] == second[1] || !third[1].Protected || third[0] != second[0] || third[2] != second[2] {
		t.Fatal("another process's rewrite not read again, or an unchanged manifest read again")
	}
	p2.Protected = true
	if err := r.UpdatePoint(ctx, p2); err != nil {
		t.Fatal(err)
	}
	if fourth := history(); !fourth[0].Protected {
		t.Fatal("this process's rewrite not read again")
	}

	// A manifest damaged in place (rewritten) is left out, as Points
	// leaves it; one deleted is forgotten.
	raw, err := store.Get(ctx, st, snapshotName(p3.ID), 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)-5] ^= 1
	if _, err := store.Put(ctx, st, snapshotName(p3.ID), raw, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := other.DeletePoint(ctx, p1); err != nil {
		t.Fatal(err)
	}
	last := history()
	if len(last) != 1 || last[0].ID != p2.ID || slices.ContainsFunc(last, func(p *Point) bool { return p.ID == p3.ID }) {
		t.Fatalf("after a damage and a delete: %d points", len(last))
	}
}
