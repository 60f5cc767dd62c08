package reposerver

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/local"
)

func newImmutable(t *testing.T) (*Immutable, *time.Time) {
	st, err := local.Create(filepath.Join(t.TempDir(), "repo"))
	if err != nil {
		t.Fatal(err)
	}
	im, err := NewImmutable(st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ClearImmutable(t, st.Root()) })
	now := time.Now()
	im.now = func() time.Time { return now }
	return im, &now
}

// TestALapsedLockLetsMaintenanceDelete: once its lock lapses, an object
// can be deleted (its flag cleared, its record removed) and replaced.
func TestALapsedLockLetsMaintenanceDelete(t *testing.T) {
	im, now := newImmutable(t)
	ctx := context.Background()
	if _, err := store.Put(ctx, im, "data/ab12", []byte("x"), store.PutOptions{RetainUntil: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := im.Delete(ctx, "data/ab12"); !errors.Is(err, store.ErrRetained) {
		t.Fatalf("delete before the lock lapsed: %v", err)
	}
	*now = now.Add(2 * time.Hour)
	if _, err := store.Put(ctx, im, "data/ab12", []byte("y"), store.PutOptions{}); err != nil {
		t.Fatalf("replace after the lock lapsed: %v", err)
	}
	if err := im.Delete(ctx, "data/ab12"); err != nil {
		t.Fatalf("delete after the lock lapsed: %v", err)
	}
	if until, err := im.lockOf("data/ab12"); err != nil || !until.IsZero() {
		t.Fatalf("the record outlived its object: %v %v", until, err)
	}
}

// TestReapplyAfterACrash: a crash between a retained write's commit and
// its flag leaves the record; Reapply makes the object immutable again,
// and ignores a record whose object never committed.
func TestReapplyAfterACrash(t *testing.T) {
	im, now := newImmutable(t)
	ctx := context.Background()
	if _, err := store.Put(ctx, im.Store, "data/ab12", []byte("x"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"data/ab12", "data/never-committed"} {
		if err := im.record(name, now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	n, err := im.Reapply(ctx)
	if err != nil || n != 1 {
		t.Fatalf("reapply: %d, %v; want 1", n, err)
	}
	p, _ := im.Path("data/ab12")
	if on, err := IsImmutable(p); !on || err != nil {
		t.Fatalf("after reapply: immutable %v, %v", on, err)
	}
}
