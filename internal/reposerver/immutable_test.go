package reposerver_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/reposerver"
	"github.com/coffer-backup/coffer/internal/reposerver/reposervertest"
	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/local"
)

// TestLockedObjectsOutliveEveryCredential: an object written with a
// retention is immutable on the file system (even root's unlink fails)
// and no credential, not even maintain, can delete, overwrite or
// shorten its lock; an extension holds; the lock is reported by Stat and
// List.
func TestLockedObjectsOutliveEveryCredential(t *testing.T) {
	srv := reposervertest.StartImmutable(t, reposerver.DefaultOptions)
	ctx := context.Background()
	maintain, appendOnly := open(t, srv, reposerver.Maintain), open(t, srv, reposerver.Append)
	if !maintain.Properties().Retention {
		t.Fatal("an immutable repository server does not say it keeps retention")
	}
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	if _, err := store.Put(ctx, appendOnly, "data/ab12", []byte("locked pack"), store.PutOptions{RetainUntil: until}); err != nil {
		t.Fatal(err)
	}
	st, err := local.Open(srv.Dir)
	if err != nil {
		t.Fatal(err)
	}
	path, _ := st.Path("data/ab12")
	if on, err := reposerver.IsImmutable(path); err != nil || !on {
		t.Fatalf("the locked object's file is not immutable: %v %v", on, err)
	}
	if err := os.Remove(path); err == nil {
		t.Fatal("root removed a locked object's file")
	}
	if err := maintain.Delete(ctx, "data/ab12"); !errors.Is(err, store.ErrRetained) {
		t.Fatalf("maintain: delete a locked object: %v, want retained", err)
	}
	if _, err := store.Put(ctx, maintain, "data/ab12", []byte("tampered"), store.PutOptions{}); !errors.Is(err, store.ErrRetained) {
		t.Fatalf("maintain: overwrite a locked object: %v, want retained", err)
	}
	if err := maintain.ExtendRetention(ctx, "data/ab12", until.Add(-30*time.Minute)); err != nil {
		t.Fatal(err)
	}
	later := until.Add(24 * time.Hour)
	if err := appendOnly.ExtendRetention(ctx, "data/ab12", later); err != nil {
		t.Fatalf("append: extend a lock: %v", err)
	}
	fi, err := maintain.Stat(ctx, "data/ab12")
	if err != nil || !fi.RetainUntil.Equal(later) {
		t.Fatalf("the lock after a shortening and an extension: %v %v, want %v", fi.RetainUntil, err, later)
	}
	var listed time.Time
	_ = maintain.List(ctx, "data/", func(fi store.ObjectInfo) error { listed = fi.RetainUntil; return nil })
	if !listed.Equal(later) {
		t.Fatalf("listed lock %v, want %v", listed, later)
	}
	if b, err := store.Get(ctx, maintain, "data/ab12", 0, -1); err != nil || string(b) != "locked pack" {
		t.Fatalf("the locked object after the attacks: %q %v", b, err)
	}
	// An object without a lock stays deletable.
	if _, err := store.Put(ctx, maintain, "data/cd34", []byte("free"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := maintain.Delete(ctx, "data/cd34"); err != nil {
		t.Fatalf("maintain: delete an unlocked object: %v", err)
	}
}
