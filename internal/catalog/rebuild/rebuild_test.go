package rebuild_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/rebuild"
	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/local"
)

var (
	fastKDF  = &crypto.KDF{Algorithm: "argon2id", Time: 1, MemoryKiB: 8 << 10, Threads: 1, Salt: []byte("0123456789abcdef")}
	password = []byte("pw")
)

// newRepo creates a repository in dir/repo and returns its location.
func newRepo(t *testing.T) string {
	t.Helper()
	loc := filepath.Join(t.TempDir(), "repo")
	st, err := local.Create(loc)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := repo.Init(context.Background(), st, repo.InitOptions{Password: password, KDF: fastKDF}); err != nil {
		t.Fatal(err)
	}
	return loc
}

func openRepo(t testing.TB, loc string, wrap func(store.Store) store.Store) *repo.Repository {
	t.Helper()
	st, err := local.Open(loc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	var s store.Store = st
	if wrap != nil {
		s = wrap(st)
	}
	r, err := repo.Open(context.Background(), s, password, repo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func openCatalog(t *testing.T) catalog.Catalog {
	t.Helper()
	c, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "catalog.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// backupDisk backs up a generated 3 MiB disk as a point of vm.
func backupDisk(ctx context.Context, r *repo.Repository, vm string, parent *repo.Point, edit func(*backup.Request)) (*repo.Point, error) {
	data := make([]byte, 3<<20)
	_, _ = rand.Read(data[:1<<20])
	req := backup.Request{
		Source: repo.Source{Kind: "qemu", Connection: "kvm1", VMID: "id-" + vm, VMName: vm},
		Mode:   "full", Parent: parent,
		Disks: []backup.Disk{{Key: "0", Name: "vda", Reader: bytes.NewReader(data), Size: int64(len(data)), Mode: "full"}},
	}
	if parent != nil {
		req.Mode = "incremental"
	}
	if edit != nil {
		edit(&req)
	}
	w, err := r.NewWriter(ctx, "test")
	if err != nil {
		return nil, err
	}
	snap, err := backup.Run(ctx, w, req, backup.Options{})
	if cerr := w.Close(context.WithoutCancel(ctx)); err == nil {
		err = cerr
	}
	return snap, err
}

func mustBackup(t *testing.T, r *repo.Repository, vm string, parent *repo.Point, edit func(*backup.Request)) *repo.Point {
	t.Helper()
	s, err := backupDisk(context.Background(), r, vm, parent, edit)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func points(t *testing.T, c catalog.Catalog, repository string) []catalog.BackupPoint {
	t.Helper()
	ps, err := c.ListBackupPoints(context.Background(), catalog.BackupPointFilter{Repository: repository})
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

func TestRebuildMirrorsRepository(t *testing.T) {
	ctx := context.Background()
	r := openRepo(t, newRepo(t), nil)
	repoID := r.Config().ID
	a1 := mustBackup(t, r, "a", nil, nil)
	a2 := mustBackup(t, r, "a", a1, nil)
	b1 := mustBackup(t, r, "b", nil, func(req *backup.Request) {
		req.Tags, req.Protected, req.JobID = map[string]string{"env": "prod"}, true, 42
		req.Time = a2.Time.Add(time.Hour)
	})
	c := openCatalog(t)
	// A stale point (forgotten since) and another repository's point.
	stale := catalog.BackupPoint{Repository: repoID, ID: strings.Repeat("0", 64), Time: time.Now()}
	other := catalog.BackupPoint{Repository: "elsewhere", ID: "x", Time: time.Now().UTC().Truncate(time.Second)}
	if err := c.PutBackupPoints(ctx, []catalog.BackupPoint{stale, other}); err != nil {
		t.Fatal(err)
	}

	res, err := rebuild.Rebuild(ctx, c, r)
	if err != nil || res.Points != 3 || len(res.Skipped) != 0 || res.Repository != repoID {
		t.Fatalf("Rebuild = %+v, %v", res, err)
	}
	got := points(t, c, repoID)
	want := []catalog.BackupPoint{}
	for _, s := range []*repo.Point{b1, a2, a1} { // newest first
		p := rebuild.PointFromSnapshot(repoID, s)
		p.Time = p.Time.UTC().Truncate(time.Microsecond)
		want = append(want, p)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("points after rebuild:\n got  %+v\n want %+v", got, want)
	}
	// Spot-check the mapping itself against the manifests.
	if got[1].Parent != a1.ID.String() || got[1].Mode != "incremental" || got[0].Tags["env"] != "prod" ||
		!got[0].Protected || got[0].JobID != 42 || got[2].Disks != 1 || got[2].BytesLogical != 3<<20 ||
		got[2].VMID != "id-a" || got[2].Connection != "kvm1" || got[2].BytesStored == 0 {
		t.Fatalf("points do not mirror the manifests: %+v", got)
	}
	if ps := points(t, c, "elsewhere"); len(ps) != 1 || !reflect.DeepEqual(ps[0], other) {
		t.Fatalf("another repository's points changed: %+v", ps)
	}

	// Recording a new point after a backup, then rebuilding, agree.
	a3 := mustBackup(t, r, "a", a2, nil)
	if err := rebuild.Record(ctx, c, r, a3); err != nil {
		t.Fatal(err)
	}
	recorded := points(t, c, repoID)
	if _, err := rebuild.Rebuild(ctx, c, r); err != nil {
		t.Fatal(err)
	}
	if again := points(t, c, repoID); len(again) != 4 || !reflect.DeepEqual(again, recorded) {
		t.Fatalf("Record and Rebuild disagree:\n recorded %+v\n rebuilt  %+v", recorded, again)
	}
}

// Damaged manifests are skipped and reported; the rest are rebuilt.
func TestRebuildSkipsDamagedManifests(t *testing.T) {
	ctx := context.Background()
	loc := newRepo(t)
	r := openRepo(t, loc, nil)
	var snaps []*repo.Point
	for _, vm := range []string{"a", "b", "c", "d"} {
		snaps = append(snaps, mustBackup(t, r, vm, nil, nil))
	}
	st := r.Store()
	name := func(s *repo.Point) string { return "snapshots/" + s.ID.String() }
	// One manifest with a flipped bit, one cut short (as a torn copy
	// would leave it), and an object that is no manifest at all.
	raw, err := store.Get(ctx, st, name(snaps[1]), 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	raw[len(raw)/2] ^= 0x10
	if _, err := store.Put(ctx, st, name(snaps[1]), raw, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, st, name(snaps[2]), raw[:10], store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, st, "snapshots/not-a-snapshot", []byte("junk"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}

	c := openCatalog(t)
	res, err := rebuild.Rebuild(ctx, c, r)
	if err != nil {
		t.Fatalf("rebuild with damaged manifests failed: %v", err)
	}
	if res.Points != 2 || len(res.Skipped) != 2 {
		t.Fatalf("Rebuild = %+v", res)
	}
	skipped := map[string]bool{res.Skipped[0].ID: true, res.Skipped[1].ID: true}
	if !skipped[snaps[1].ID.String()] || !skipped[snaps[2].ID.String()] || res.Skipped[0].Err == "" {
		t.Fatalf("skipped %+v, want %s and %s", res.Skipped, snaps[1].ID.Short(), snaps[2].ID.Short())
	}
	var ids []string
	for _, p := range points(t, c, r.Config().ID) {
		ids = append(ids, p.ID)
	}
	if want := []string{snaps[3].ID.String(), snaps[0].ID.String()}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("rebuilt points %v, want %v", ids, want)
	}
}

// failingReads fails reads of manifests with an I/O error (not damage).
type failingReads struct{ store.Store }

var errInjected = errors.New("injected I/O error")

func (f failingReads) Read(ctx context.Context, name string, off, n int64) (io.ReadCloser, error) {
	if strings.HasPrefix(name, "snapshots/") {
		return nil, errInjected
	}
	return f.Store.Read(ctx, name, off, n)
}

// A storage failure aborts the rebuild and leaves the catalog as it was:
// a point must never vanish from the catalog because a read failed.
func TestRebuildStorageErrorKeepsCatalog(t *testing.T) {
	ctx := context.Background()
	loc := newRepo(t)
	r := openRepo(t, loc, nil)
	mustBackup(t, r, "a", nil, nil)
	mustBackup(t, r, "b", nil, nil)
	c := openCatalog(t)
	if _, err := rebuild.Rebuild(ctx, c, r); err != nil {
		t.Fatal(err)
	}
	before := points(t, c, r.Config().ID)

	broken := openRepo(t, loc, func(s store.Store) store.Store { return failingReads{s} })
	if _, err := rebuild.Rebuild(ctx, c, broken); !errors.Is(err, errInjected) {
		t.Fatalf("rebuild over failing storage: %v", err)
	}
	if after := points(t, c, r.Config().ID); len(before) != 2 || !reflect.DeepEqual(after, before) {
		t.Fatalf("catalog changed by a failed rebuild: before %+v after %+v", before, after)
	}
}
