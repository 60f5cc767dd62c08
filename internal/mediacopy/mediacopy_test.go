package mediacopy_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/backup/backuptest"
	"github.com/coffer-backup/coffer/internal/media/format"
	"github.com/coffer-backup/coffer/internal/media/volume"
	"github.com/coffer-backup/coffer/internal/media/vtl"
	"github.com/coffer-backup/coffer/internal/mediacopy"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/restore"
)

// image writes a disk image of random data with a hole in the middle.
func image(t *testing.T, seed uint64, size int) (string, []byte) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, size)
	for i := range b {
		if i < size/3 || i > size/2 {
			b[i] = byte(r.Uint32())
		}
	}
	p := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p, b
}

func library(t *testing.T, cartridges int, capacity int64) *volume.Library {
	t.Helper()
	dir := t.TempDir()
	if err := vtl.Create(dir, vtl.Config{Drives: 1, Slots: cartridges, Capacity: capacity}); err != nil {
		t.Fatal(err)
	}
	l, err := vtl.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	for i := 1; i <= cartridges; i++ {
		if err := l.AddCartridge("CFR00"+string(rune('0'+i))+"L8", i, vtl.CartridgeInfo{}); err != nil {
			t.Fatal(err)
		}
	}
	d, _ := l.Drive(0)
	return &volume.Library{Changer: l, Drive: d}
}

func placedOf(ixs []format.VolumeIndex, point string) []volume.Placed {
	var out []volume.Placed
	for _, ix := range ixs {
		for _, s := range ix.Segments {
			if s.Point == point {
				out = append(out, volume.Placed{Barcode: ix.Label.Barcode, Segment: s})
			}
		}
	}
	return out
}

// Two points copied to tape multiplexed, across volumes, restore from the
// tape alone after the repository is gone: the staged repository opens
// with the repository's password and the restore writer rebuilds each
// disk byte for byte.
func TestCopyAndRestoreWithoutTheRepository(t *testing.T) {
	ctx := context.Background()
	src := repotest.New(t, repo.InitOptions{ChunkSize: 64 << 10})
	pathA, diskA := image(t, 1, 1<<20+12345)
	pathB, diskB := image(t, 2, 700<<10)
	snapA := backuptest.BackupImage(t, src, pathA, backup.Options{})
	snapB := backuptest.BackupImage(t, src, pathB, backup.Options{})

	lib := library(t, 3, 1<<20) // smaller than the two points: the copy spans volumes
	res, err := mediacopy.Copy(ctx, src, []*repo.Point{snapA, snapB}, lib, mediacopy.CopyOptions{
		Pool: "offsite", BlockSize: 32 << 10, WriteOptions: volume.WriteOptions{Multiplex: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Volumes) < 2 {
		t.Fatalf("the copy fit on %d volume(s); the test wants it to span", len(res.Volumes))
	}
	// The repository is gone: only the tape and the password are left.
	if err := os.RemoveAll(src.Store().Properties().Location); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		snap *repo.Point
		disk []byte
	}{{snapA, diskA}, {snapB, diskB}} {
		segs, err := mediacopy.Choose(placedOf(res.Volumes, c.snap.ID.String()))
		if err != nil {
			t.Fatal(err)
		}
		staged, err := mediacopy.Stage(ctx, lib, segs, t.TempDir(), []byte(repotest.Password), volume.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if staged.Point.ID != c.snap.ID {
			t.Fatalf("staged point %s, want %s", staged.Point.ID, c.snap.ID)
		}
		out := filepath.Join(t.TempDir(), "restored.img")
		if _, err := restore.ToFile(ctx, staged.Repo, staged.Point, staged.Point.Disks[0], out, restore.FileOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, c.disk) {
			t.Fatalf("point %s: restored disk differs", c.snap.ID.Short())
		}
		if staged.Read.BlocksRead != staged.Read.BlocksNeeded {
			t.Fatalf("read %d blocks for %d needed", staged.Read.BlocksRead, staged.Read.BlocksNeeded)
		}
		staged.Close()
	}
}

// A wrong password opens nothing staged from tape.
func TestStagedPointNeedsThePassword(t *testing.T) {
	ctx := context.Background()
	src := repotest.New(t, repo.InitOptions{ChunkSize: 64 << 10})
	path, _ := image(t, 3, 300<<10)
	snap := backuptest.BackupImage(t, src, path, backup.Options{})
	lib := library(t, 1, 8<<20)
	res, err := mediacopy.Copy(ctx, src, []*repo.Point{snap}, lib, mediacopy.CopyOptions{Pool: "p", BlockSize: 32 << 10})
	if err != nil {
		t.Fatal(err)
	}
	segs, err := mediacopy.Choose(placedOf(res.Volumes, snap.ID.String()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mediacopy.Stage(ctx, lib, segs, t.TempDir(), []byte("wrong"), volume.ReadOptions{}); err == nil {
		t.Fatal("staged with a wrong password")
	}
}
