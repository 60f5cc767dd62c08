package backup_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/forget"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/gc"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/retention"
	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/local"
)

// lockingStore is a unit-test fake of an Object Lock bucket on top of the
// local backend: objects written with RetainUntil (or extended later)
// cannot be deleted or overwritten before that time.
type lockingStore struct {
	*local.Store
	mu    sync.Mutex
	until map[string]time.Time
}

func (l *lockingStore) Properties() store.Properties {
	p := l.Store.Properties()
	p.Retention = true
	return p
}

func (l *lockingStore) Create(ctx context.Context, name string, o store.PutOptions) (store.ObjectWriter, error) {
	l.mu.Lock()
	locked := time.Now().Before(l.until[name])
	if !o.RetainUntil.IsZero() {
		defer func() { l.until[name] = o.RetainUntil }()
	}
	l.mu.Unlock()
	if locked {
		return nil, store.ErrRetained
	}
	return l.Store.Create(ctx, name, o)
}

func (l *lockingStore) Delete(ctx context.Context, name string) error {
	l.mu.Lock()
	locked := time.Now().Before(l.until[name])
	l.mu.Unlock()
	if locked {
		return store.ErrRetained
	}
	return l.Store.Delete(ctx, name)
}

func (l *lockingStore) Stat(ctx context.Context, name string) (store.ObjectInfo, error) {
	fi, err := l.Store.Stat(ctx, name)
	l.mu.Lock()
	fi.RetainUntil = l.until[name]
	l.mu.Unlock()
	return fi, err
}

func (l *lockingStore) ExtendRetention(_ context.Context, name string, t time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if t.After(l.until[name]) {
		l.until[name] = t
	}
	return nil
}

func (l *lockingStore) lockedUntil(name string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.until[name]
}

func TestImmutableBackupPoints(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	base, err := local.Create(filepath.Join(dir, "repo"))
	if err != nil {
		t.Fatal(err)
	}
	st := &lockingStore{Store: base, until: map[string]time.Time{}}
	if _, err := repo.Init(ctx, st, repo.InitOptions{Password: []byte(repotest.Password), KDF: repotest.FastKDF, PackSize: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	r, err := repo.Open(ctx, st, []byte(repotest.Password), repo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "disk.img")
	makeImage(t, img, 16<<20)
	until1 := time.Now().Add(30 * 24 * time.Hour)
	backupLocked := func(until time.Time) *repo.Point {
		d, src := diskOf(t, img)
		defer src.Close()
		w, err := r.NewWriter(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		s, err := backup.Run(ctx, w, backup.Request{Source: repo.Source{Kind: "disk", VMName: "v"}, Disks: []backup.Disk{d}, RetainUntil: until}, backup.Options{})
		if cerr := w.Close(ctx); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s1 := backupLocked(until1)
	// Every object the point needs is locked at least until its retention.
	needed := []string{"snapshots/" + s1.ID.String(), s1.Disks[0].Map}
	_ = st.List(ctx, "data/", func(fi store.ObjectInfo) error { needed = append(needed, fi.Name); return nil })
	for _, n := range needed {
		if st.lockedUntil(n).Before(until1) {
			t.Fatalf("%s locked until %v, the point needs %v", n, st.lockedUntil(n), until1)
		}
	}
	// A later point reusing the same chunks extends their locks.
	until2 := time.Now().Add(90 * 24 * time.Hour)
	s2 := backupLocked(until2)
	_ = st.List(ctx, "data/", func(fi store.ObjectInfo) error {
		if st.lockedUntil(fi.Name).Before(until2) {
			t.Fatalf("shared pack %s not extended to the second point's retention", fi.Name)
		}
		return nil
	})
	// Nobody, coffer included, can delete or overwrite them now.
	if err := st.Delete(ctx, "snapshots/"+s1.ID.String()); !errors.Is(err, store.ErrRetained) {
		t.Fatalf("locked manifest deleted: %v", err)
	}
	groups, err := forget.Run(ctx, r, forget.Options{Policy: retention.Policy{Last: 1}})
	if err != nil || len(groups) != 1 || len(groups[0].Remove) != 0 || len(groups[0].Locked) != 1 ||
		groups[0].Locked[0].ID != s1.ID.String() || !groups[0].Locked[0].Until.Equal(s1.RetainUntil) {
		t.Fatalf("forget on locked points: %+v %v", groups, err)
	}
	// Simulate an unlocked manifest (e.g. its lock expired) whose packs are
	// still locked by the newer point: gc keeps them and leaves nothing
	// half-deleted.
	st.mu.Lock()
	st.until["snapshots/"+s1.ID.String()] = time.Time{}
	st.until[s1.Disks[0].Map] = time.Time{}
	st.mu.Unlock()
	if err := r.DeletePoint(ctx, s1); err != nil {
		t.Fatal(err)
	}
	if _, err := gc.Run(ctx, r, gc.Options{}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "restored.img")
	checkRestore(t, r, s2, out, img)
}

func checkRestore(t *testing.T, r *repo.Repository, s *repo.Point, out, want string) {
	t.Helper()
	restoreTo(t, r, s, out)
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(want)
	if string(a) != string(b) {
		t.Fatal("restore differs")
	}
}
