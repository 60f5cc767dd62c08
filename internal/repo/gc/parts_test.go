package gc

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/backup/backuptest"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/repo/verify"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/store"
)

// smallParts makes plans list n names per part object for one test.
func smallParts(t *testing.T, n int) {
	old := partNames
	partNames = n
	t.Cleanup(func() { partNames = old })
}

func newRepo(t *testing.T) *repo.Repository {
	// 64 KiB packs of 64 KiB chunks: every MiB of random data is 16 packs.
	return repotest.New(t, repo.InitOptions{ChunkSize: 64 << 10, PackSize: 64 << 10})
}

func reopen(t *testing.T, st store.Store) *repo.Repository {
	t.Helper()
	r, err := repo.Open(context.Background(), st, []byte(repotest.Password), repo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func randomImage(t *testing.T, n int) (string, []byte) {
	t.Helper()
	data := make([]byte, n)
	_, _ = rand.Read(data)
	path := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, data
}

func objects(t *testing.T, st store.Store, prefix string) []string {
	t.Helper()
	var names []string
	if err := st.List(context.Background(), prefix, func(fi store.ObjectInfo) error {
		names = append(names, fi.Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return names
}

func checkRepository(t *testing.T, st store.Store, s *repo.Point, want []byte) {
	t.Helper()
	ctx := context.Background()
	r := reopen(t, st)
	rep, err := verify.Run(ctx, r, verify.Options{ReadData: true})
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v %+v", err, rep)
	}
	out := filepath.Join(t.TempDir(), "restored")
	if _, err := restore.ToFile(ctx, r, s, s.Disks[0], out, restore.FileOptions{}); err != nil {
		t.Fatalf("restore %s: %v", s.ID.Short(), err)
	}
	if got, _ := os.ReadFile(out); string(got) != string(want) {
		t.Fatalf("point %s restores different bytes", s.ID.Short())
	}
}

// TestPlanListsInParts: a plan whose packs and disk maps do not fit one
// part object lists them over several, which execution reads back; parts
// of a plan that was never saved are removed, and nothing of the plan is
// left once it is carried out.
func TestPlanListsInParts(t *testing.T) {
	smallParts(t, 3)
	ctx := context.Background()
	r := newRepo(t)
	img, _ := randomImage(t, 1<<20)
	old := backuptest.BackupImage(t, r, img, backup.Options{})
	if err := r.DeletePoint(ctx, old); err != nil {
		t.Fatal(err)
	}
	for range 4 { // orphan disk maps: manifests deleted, maps left behind
		small, _ := randomImage(t, 64<<10)
		s := backuptest.BackupImage(t, r, small, backup.Options{})
		if err := r.Store().Delete(ctx, "snapshots/"+s.ID.String()); err != nil {
			t.Fatal(err)
		}
	}
	keptImg, keptData := randomImage(t, 512<<10)
	kept := backuptest.BackupImage(t, r, keptImg, backup.Options{})
	stale := newListWriter(ctx, r, "0123456789abcdef", "packs") // a plan a kill kept from being saved
	if err := stale.add("data/00000000000000000000000000000000"); err != nil {
		t.Fatal(err)
	}
	if _, err := stale.finish(); err != nil {
		t.Fatal(err)
	}
	session, err := r.NewWriter(ctx, "live session") // defers the deletions
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(ctx, reopen(t, r.Store()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Deferred || rep.PacksPlanned < 16 || rep.MapsDeleted != 4 {
		t.Fatalf("first run: %+v, want deletion of at least 16 packs and 4 maps deferred", rep)
	}
	pf, err := loadPlan(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(pf.PackParts) != (rep.PacksPlanned+2)/3 || len(pf.MapParts) != 2 || len(pf.Packs)+len(pf.Maps) != 0 {
		t.Fatalf("plan lists %d packs in %d parts and 4 maps in %d parts (%d names inline)", rep.PacksPlanned, len(pf.PackParts), len(pf.MapParts), len(pf.Packs)+len(pf.Maps))
	}
	if got, want := strings.Join(slices.Sorted(slices.Values(objects(t, r.Store(), partPrefix))), " "), strings.Join(slices.Sorted(slices.Values(append(pf.PackParts, pf.MapParts...))), " "); got != want {
		t.Fatalf("part objects %s, want only the plan's %s", got, want)
	}
	if err := session.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rep2, err := Run(ctx, reopen(t, r.Store()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep2.Deferred || rep2.PacksDeleted != rep.PacksPlanned {
		t.Fatalf("second run: %+v, want the %d planned packs deleted", rep2, rep.PacksPlanned)
	}
	if left := objects(t, r.Store(), "gc/"); len(left) != 0 {
		t.Fatalf("left after the plan was carried out: %v", left)
	}
	if maps := objects(t, r.Store(), "maps/"); len(maps) != 1 || maps[0] != kept.Disks[0].Map {
		t.Fatalf("disk maps left: %v, want only %s", maps, kept.Disks[0].Map)
	}
	checkRepository(t, r.Store(), kept, keptData)
}

// packDeleteFails refuses to delete packs, as a backend failing midway
// would: execution keeps them in its plan for the next run.
type packDeleteFails struct{ store.Store }

func (s packDeleteFails) Delete(ctx context.Context, name string) error {
	if strings.HasPrefix(name, "data/") {
		return errors.New("injected: backend unavailable")
	}
	return s.Store.Delete(ctx, name)
}

// TestResumedExecutionKeepsRescuedPacks: an execution rescues the chunks a
// racing backup used, deletes the superseded segments and is killed before
// the packs. The next execution finds those chunks in the rescue segment,
// in packs the plan still dooms, with the old segments gone: it must keep
// those packs.
func TestResumedExecutionKeepsRescuedPacks(t *testing.T) {
	smallParts(t, 2)
	ctx := context.Background()
	r := newRepo(t)
	img, data := randomImage(t, 1<<20)
	other, _ := randomImage(t, 512<<10) // garbage nobody rescues
	for _, path := range []string{img, other} {
		if err := r.DeletePoint(ctx, backuptest.BackupImage(t, r, path, backup.Options{})); err != nil {
			t.Fatal(err)
		}
	}
	w, err := r.NewWriter(ctx, "racing backup") // loaded the index before the compaction
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(ctx, reopen(t, r.Store()), Options{})
	if err != nil || !rep.Deferred || rep.PacksPlanned < 24 {
		t.Fatalf("plan: %+v %v, want deletion of at least 24 packs deferred", rep, err)
	}
	src, err := backup.OpenFile(img)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	s, err := backup.Run(ctx, w, backup.Request{Source: repo.Source{Kind: "disk", VMName: "img"},
		Disks: []backup.Disk{{Key: "0", Name: "img", Reader: src, Size: src.Size()}}}, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// The plan as the kill leaves it: execution rewrites it only at its end.
	planObjects := map[string][]byte{}
	for _, name := range append(objects(t, r.Store(), partPrefix), planName) {
		b, err := store.Get(ctx, r.Store(), name, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		planObjects[name] = b
	}
	o := Options{}
	o.defaults()
	first := &Report{}
	if err := execute(ctx, reopen(t, packDeleteFails{r.Store()}), o, first, ""); err != nil {
		t.Fatal(err)
	}
	if first.ChunksRescued != 16 || first.PacksDeleted != 0 || len(objects(t, r.Store(), "index/")) != 2 {
		t.Fatalf("interrupted execution: %+v; want 16 chunks rescued, only the compacted and the rescue segments left", first)
	}
	for name, b := range planObjects {
		if _, err := store.Put(ctx, r.Store(), name, b, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	second := &Report{}
	if err := execute(ctx, reopen(t, r.Store()), o, second, ""); err != nil {
		t.Fatal(err)
	}
	if second.ChunksRescued != 0 || second.PacksDeleted != rep.PacksPlanned-16 {
		t.Fatalf("resumed execution: %+v, want the %d planned packs but the 16 rescued ones deleted", second, rep.PacksPlanned)
	}
	checkRepository(t, r.Store(), s, data)
}

// writeOrphan stores a valid pack that no index lists, as a writer that
// died after its lease was removed leaves behind, last modified age ago.
func writeOrphan(t *testing.T, r *repo.Repository, age time.Duration) string {
	t.Helper()
	ctx := context.Background()
	var session pack.SessionPrefix
	_, _ = rand.Read(session[:])
	pid := pack.MakeID(session, 1)
	var buf bytes.Buffer
	pw, err := pack.NewWriter(&buf, r.Key())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pw.Add(id.Random(), r.Key().Seal(nil, []byte("\x00orphan"), "chunk"), 6); err != nil {
		t.Fatal(err)
	}
	if err := pw.Finish(); err != nil {
		t.Fatal(err)
	}
	name := pack.ObjectName(pid)
	if _, err := store.Put(ctx, r.Store(), name, buf.Bytes(), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	when := time.Now().Add(-age)
	if err := os.Chtimes(filepath.Join(r.Store().Properties().Location, "data", pid.String()[:2], pid.String()), when, when); err != nil {
		t.Fatal(err)
	}
	return name
}

// TestOrphanPacksCollected: a pack no index lists is deleted once it is
// older than any writer could still be working on it, and left alone
// before; indexed packs around it are untouched.
func TestOrphanPacksCollected(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	img, data := randomImage(t, 512<<10)
	kept := backuptest.BackupImage(t, r, img, backup.Options{})
	old := writeOrphan(t, r, 2*time.Hour)
	young := writeOrphan(t, r, time.Minute)
	before := len(objects(t, r.Store(), "data/"))
	rep, err := Run(ctx, reopen(t, r.Store()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.PacksPlanned != 1 || rep.PacksDeleted != 1 || rep.BytesFreed == 0 {
		t.Fatalf("%+v, want the old orphan planned and deleted", rep)
	}
	if _, err := r.Store().Stat(ctx, old); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("old orphan %s: %v, want it deleted", old, err)
	}
	if _, err := r.Store().Stat(ctx, young); err != nil {
		t.Fatalf("young orphan %s: %v, want it kept", young, err)
	}
	if after := len(objects(t, r.Store(), "data/")); after != before-1 {
		t.Fatalf("%d packs left of %d, want one fewer", after, before)
	}
	checkRepository(t, r.Store(), kept, data)
}

// packReadFails refuses to read packs, as a backend failing during a
// repack would.
type packReadFails struct{ store.Store }

func (s packReadFails) Read(ctx context.Context, name string, off, length int64) (io.ReadCloser, error) {
	if strings.HasPrefix(name, "data/") {
		return nil, errors.New("injected: backend unavailable")
	}
	return s.Store.Read(ctx, name, off, length)
}

// TestFailedRepackLosesNothing: when the live chunks of a mostly dead pack
// cannot be copied out, gc fails before compacting the index: nothing is
// dropped from it, nothing is deleted, and the next run does the work.
func TestFailedRepackLosesNothing(t *testing.T) {
	ctx := context.Background()
	r := repotest.New(t, repo.InitOptions{ChunkSize: 64 << 10, PackSize: 1 << 20}) // 16 chunks a pack
	img, data := randomImage(t, 1<<20)
	first := backuptest.BackupImage(t, r, img, backup.Options{})
	f, err := os.OpenFile(img, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	fresh := make([]byte, 768<<10) // 12 of the 16 chunks change: their old pack is 75% dead
	_, _ = rand.Read(fresh)
	copy(data[256<<10:], fresh)
	if _, err := f.WriteAt(fresh, 256<<10); err != nil {
		t.Fatal(err)
	}
	f.Close()
	second := backuptest.BackupImage(t, r, img, backup.Options{})
	if err := r.DeletePoint(ctx, first); err != nil {
		t.Fatal(err)
	}
	before := strings.Join(objects(t, r.Store(), "index/"), " ")
	packs := len(objects(t, r.Store(), "data/"))
	if _, err := Run(ctx, reopen(t, packReadFails{r.Store()}), Options{}); err == nil {
		t.Fatal("gc succeeded although no pack could be read for the repack")
	}
	if after := strings.Join(objects(t, r.Store(), "index/"), " "); after != before {
		t.Fatalf("index segments changed by a failed gc: %s, before %s", after, before)
	}
	if n := len(objects(t, r.Store(), "data/")); n < packs {
		t.Fatalf("%d packs left of %d after a failed gc", n, packs)
	}
	checkRepository(t, r.Store(), second, data)
	rep, err := Run(ctx, reopen(t, r.Store()), Options{})
	if err != nil || rep.PacksRepacked != 1 || rep.PacksDeleted == 0 {
		t.Fatalf("next gc: %+v %v, want the old pack repacked and deleted", rep, err)
	}
	checkRepository(t, r.Store(), second, data)
}

// forgetOnRead forgets a point (manifest, then disk maps, as
// repo.DeletePoint does) when its first disk map is first read: a
// forget racing gc's mark.
type forgetOnRead struct {
	store.Store
	point *repo.Point
	once  *sync.Once
}

func (s forgetOnRead) forget(ctx context.Context, name string) {
	if name != s.point.Disks[0].Map {
		return
	}
	s.once.Do(func() {
		_ = s.Store.Delete(ctx, "snapshots/"+s.point.ID.String())
		for _, d := range s.point.Disks {
			_ = s.Store.Delete(ctx, d.Map)
		}
	})
}

func (s forgetOnRead) Stat(ctx context.Context, name string) (store.ObjectInfo, error) {
	s.forget(ctx, name)
	return s.Store.Stat(ctx, name)
}

func (s forgetOnRead) Read(ctx context.Context, name string, off, length int64) (io.ReadCloser, error) {
	s.forget(ctx, name)
	return s.Store.Read(ctx, name, off, length)
}

// TestPointForgottenDuringMarkIsSkipped: a point forgotten while gc marks
// (its maps gone under a manifest that is gone too) is skipped instead of
// stopping the collection (schemathesis's parallel forget and gc found
// it), and the points left restore.
func TestPointForgottenDuringMarkIsSkipped(t *testing.T) {
	ctx := context.Background()
	r := newRepo(t)
	imgA, dataA := randomImage(t, 1<<20)
	imgB, _ := randomImage(t, 1<<20)
	kept := backuptest.BackupImage(t, r, imgA, backup.Options{})
	doomed := backuptest.BackupImage(t, r, imgB, backup.Options{})
	rg := reopen(t, forgetOnRead{Store: r.Store(), point: doomed, once: &sync.Once{}})
	if _, err := Run(ctx, rg, Options{}); err != nil {
		t.Fatalf("gc with a point forgotten during its mark: %v", err)
	}
	if _, err := r.LoadPoint(ctx, doomed.ID); !errors.Is(err, repo.ErrSnapshotNotFound) {
		t.Fatalf("the racing forget did not happen: %v", err)
	}
	checkRepository(t, r.Store(), kept, dataA)
}
