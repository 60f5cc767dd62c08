package gc_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/gc"
	"github.com/coffer-backup/coffer/internal/repo/verify"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/store/local"
)

var fastKDF = &crypto.KDF{Algorithm: "argon2id", Time: 1, MemoryKiB: 8 << 10, Threads: 1, Salt: []byte("0123456789abcdef")}

func setup(t *testing.T) (*repo.Repository, string) {
	dir := t.TempDir()
	st, err := local.Create(filepath.Join(dir, "repo"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := repo.Init(ctx, st, repo.InitOptions{Password: []byte("pw"), KDF: fastKDF, PackSize: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	r, err := repo.Open(ctx, st, []byte("pw"), repo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r, dir
}

func image(t *testing.T, path string, data []byte) {
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func backupFile(t *testing.T, r *repo.Repository, w *repo.Writer, path, name string) *repo.Point {
	t.Helper()
	ctx := context.Background()
	src, err := backup.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	own := w == nil
	if own {
		if w, err = r.NewWriter(ctx, "test"); err != nil {
			t.Fatal(err)
		}
	}
	s, err := backup.Run(ctx, w, backup.Request{Source: repo.Source{Kind: "disk", VMName: name},
		Disks: []backup.Disk{{Key: "0", Name: name, Reader: src, Size: src.Size()}}}, backup.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if own {
		if err := w.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func checkRestores(t *testing.T, r *repo.Repository, s *repo.Point, want []byte, dir string) {
	t.Helper()
	out := filepath.Join(dir, "out-"+s.ID.Short())
	if _, err := restore.ToFile(context.Background(), r, s, s.Disks[0], out, restore.FileOptions{Overwrite: true}); err != nil {
		t.Fatalf("restore %s: %v", s.ID.Short(), err)
	}
	got, _ := os.ReadFile(out)
	if !bytes.Equal(got, want) {
		t.Fatalf("snapshot %s restores different bytes", s.ID.Short())
	}
}

func mustVerify(t *testing.T, r *repo.Repository) {
	t.Helper()
	if err := r.ReloadIndex(context.Background()); err != nil {
		t.Fatal(err)
	}
	rep, err := verify.Run(context.Background(), r, verify.Options{ReadData: true})
	if err != nil || !rep.OK() {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}

// TestBackupRacingGCIsRescued runs the dangerous interleaving on purpose: a
// backup looks up a chunk that is garbage, gc plans its deletion while the
// backup runs, and the backup then commits a point referencing it. The
// deletion must wait for the backup and then keep the chunk.
func TestBackupRacingGCIsRescued(t *testing.T) {
	r, dir := setup(t)
	ctx := context.Background()
	data := randomBytes(3 << 20)
	img := filepath.Join(dir, "a.img")
	image(t, img, data)
	old := backupFile(t, r, nil, img, "a")
	if err := r.DeletePoint(ctx, old); err != nil { // its chunks are now garbage
		t.Fatal(err)
	}
	w, err := r.NewWriter(ctx, "racing backup") // live while gc plans
	if err != nil {
		t.Fatal(err)
	}
	// gc runs from another process: its own handle on the repository. The
	// backup's handle keeps the index view it loaded before the compaction.
	gcRepo, err := repo.Open(ctx, r.Store(), []byte("pw"), repo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := gc.Run(ctx, gcRepo, gc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Deferred || rep.PacksPlanned == 0 {
		t.Fatalf("gc did not defer its deletions for the live session: %+v", rep)
	}
	// The backup deduplicates against chunks of its session's view and
	// commits a point that needs them.
	s := backupFile(t, r, w, img, "a")
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err = gc.Run(ctx, gcRepo, gc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := len(data) / r.Config().ChunkSize; rep.Deferred || rep.ChunksRescued != want {
		t.Fatalf("after the session ended: %+v, want %d chunks rescued", rep, want)
	}
	mustVerify(t, r)
	checkRestores(t, r, s, data, dir)
}

// TestMarkWithTinyMemoryBudget forces the mark to spill to disk and checks
// the outcome is the same as with a large budget.
func TestMarkWithTinyMemoryBudget(t *testing.T) {
	r, dir := setup(t)
	ctx := context.Background()
	var keep []*repo.Point
	var contents [][]byte
	for i := range 5 {
		data := randomBytes(2<<20 + i*4096)
		img := filepath.Join(dir, "img")
		image(t, img, data)
		s := backupFile(t, r, nil, img, "x")
		if i%2 == 0 {
			keep, contents = append(keep, s), append(contents, data)
		} else if err := r.DeletePoint(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := gc.Run(ctx, r, gc.Options{MemoryBudget: 1 << 10, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if rep.PacksDeleted == 0 || rep.ChunksReferenced == 0 {
		t.Fatalf("nothing collected: %+v", rep)
	}
	mustVerify(t, r)
	for i, s := range keep {
		checkRestores(t, r, s, contents[i], dir)
	}
}

// TestRepackMostlyDeadPacks keeps one chunk of many packs alive and checks
// gc copies it out and deletes the rest.
func TestRepackMostlyDeadPacks(t *testing.T) {
	st, err := local.Create(filepath.Join(t.TempDir(), "repo"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := repo.Init(ctx, st, repo.InitOptions{Password: []byte("pw"), KDF: fastKDF, PackSize: 8 << 20}); err != nil {
		t.Fatal(err)
	}
	r, _ := repo.Open(ctx, st, []byte("pw"), repo.Options{})
	dir := t.TempDir()
	data := randomBytes(8 << 20)
	img := filepath.Join(dir, "a.img")
	image(t, img, data)
	first := backupFile(t, r, nil, img, "a")
	copy(data[1<<20:], randomBytes(7<<20)) // only the first MiB survives
	image(t, img, data)
	second := backupFile(t, r, nil, img, "a")
	if err := r.DeletePoint(ctx, first); err != nil {
		t.Fatal(err)
	}
	rep, err := gc.Run(ctx, r, gc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.PacksRepacked == 0 || rep.BytesRepacked == 0 || rep.PacksDeleted == 0 {
		t.Fatalf("no repack: %+v", rep)
	}
	mustVerify(t, r)
	checkRestores(t, r, second, data, dir)
}

// TestOrphansRemoved removes disk maps left by a crash between manifest and
// map deletion, and the gc dry run changes nothing.
func TestOrphansRemoved(t *testing.T) {
	r, dir := setup(t)
	ctx := context.Background()
	img := filepath.Join(dir, "a.img")
	image(t, img, randomBytes(1<<20))
	s := backupFile(t, r, nil, img, "a")
	// Simulate a crash after the manifest was deleted but not its map.
	if err := r.Store().Delete(ctx, "snapshots/"+s.ID.String()); err != nil {
		t.Fatal(err)
	}
	dry, err := gc.Run(ctx, r, gc.Options{DryRun: true})
	if err != nil || dry.MapsDeleted != 1 {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	if _, err := r.Store().Stat(ctx, s.Disks[0].Map); err != nil {
		t.Fatal("dry run deleted the map")
	}
	if _, err := gc.Run(ctx, r, gc.Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Store().Stat(ctx, s.Disks[0].Map); err == nil {
		t.Fatal("orphan disk map survived")
	}
	mustVerify(t, r)
}
