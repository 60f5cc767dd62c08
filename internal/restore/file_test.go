package restore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/backup/backuptest"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/restore"
)

const testChunk = 64 << 10

// testImage is a disk whose layout exercises every write path of ToFile:
// runs of consecutive chunks (written as batches), a chunk repeated at
// several offsets (one chunk, several spans), all-zero chunks (holes) and
// a short last chunk whose length is not block-aligned (written through
// the page cache even when the rest goes around it).
func testImage(t *testing.T) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	img := make([]byte, 40*testChunk+12345)
	for i := range img {
		img[i] = byte(rng.Uint32())
		if (i/testChunk)%3 == 0 {
			img[i] &= 0x0f // compressible chunks too
		}
	}
	chunk := func(i int) []byte { return img[i*testChunk : (i+1)*testChunk] }
	copy(chunk(10), chunk(3))
	copy(chunk(25), chunk(3))
	for i := 11; i < 20; i++ {
		clear(chunk(i))
	}
	return img
}

func backUp(t *testing.T, img []byte) (*repo.Repository, *repo.Point) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "disk.raw")
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	r := repotest.New(t, repo.InitOptions{ChunkSize: testChunk, PackSize: 256 << 10})
	snap := backuptest.BackupImage(t, r, path, backup.Options{Workers: 3})
	return r, snap
}

// TestToFileRestoresEveryLayout restores onto a disk filesystem (O_DIRECT
// writes into reserved blocks) and onto tmpfs, with one and several
// workers, planned at once and in windows of 7 spans (which cut through
// runs and put the repeated chunk in several windows), and compares every
// byte and the holes.
func TestToFileRestoresEveryLayout(t *testing.T) {
	for _, window := range []uint64{0, 7} {
		if window > 0 {
			defer restore.SetPlanWindow(window)()
		}
		t.Run(fmt.Sprintf("window=%d", window), testToFileLayouts)
	}
}

func testToFileLayouts(t *testing.T) {
	img := testImage(t)
	r, snap := backUp(t, img)
	dirs := map[string]string{"disk": t.TempDir()}
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "coffer-restore-test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		dirs["tmpfs"] = d
	}
	for name, dir := range dirs {
		for _, workers := range []int{1, 4} {
			out := filepath.Join(dir, name+".raw")
			st, err := restore.ToFile(context.Background(), r, snap, snap.Disks[0], out, restore.FileOptions{Workers: workers, Overwrite: true})
			if err != nil {
				t.Fatalf("%s, %d workers: %v", name, workers, err)
			}
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, img) {
				t.Fatalf("%s, %d workers: restored image differs from the source", name, workers)
			}
			// 40 chunks + the tail, 9 of them zeros: 31 written (the
			// repeated chunk counted at each offset).
			if want := int64(31*testChunk + 12345); st.BytesWritten != want {
				t.Errorf("%s: wrote %d bytes, want %d", name, st.BytesWritten, want)
			}
			var sys syscall.Stat_t
			if err := syscall.Stat(out, &sys); err != nil {
				t.Fatal(err)
			}
			if allocated := sys.Blocks * 512; allocated > int64(len(img))-9*testChunk+testChunk {
				t.Errorf("%s: %d bytes allocated for %d bytes of data: the zero chunks are not holes", name, allocated, st.BytesWritten)
			}
		}
	}
}

// TestToFileResumes interrupts a restore after a few batches, then resumes
// it: the resumed run writes only what the first one had not, and the
// image is exact.
func TestToFileResumes(t *testing.T) {
	img := testImage(t)
	r, snap := backUp(t, img)
	out := filepath.Join(t.TempDir(), "disk.raw")
	ctx, cancel := context.WithCancel(context.Background())
	batches := 0
	defer restore.SetAfterBatch(func() {
		if batches++; batches == 3 {
			cancel()
		}
	})()
	first, err := restore.ToFile(ctx, r, snap, snap.Disks[0], out, restore.FileOptions{Workers: 1})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted restore: %v", err)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatal("an interrupted restore left an image under the final name")
	}
	if first.BytesWritten == 0 {
		t.Fatal("the interrupted restore wrote nothing: the test interrupts too early")
	}
	again, err := restore.ToFile(context.Background(), r, snap, snap.Disks[0], out, restore.FileOptions{Workers: 1, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	total := int64(31*testChunk + 12345)
	if !again.Resumed || again.BytesWritten+first.BytesWritten != total {
		t.Fatalf("resumed: %v, wrote %d after %d, want %d in all", again.Resumed, again.BytesWritten, first.BytesWritten, total)
	}
	if got, _ := os.ReadFile(out); !bytes.Equal(got, img) {
		t.Fatal("the resumed restore differs from the source")
	}
}

// TestToFileRefusesTargetsItCannotReplace: an existing file without
// Overwrite, and a directory even with it, are refused before anything is
// written, and leave no partial file behind.
func TestToFileRefusesTargetsItCannotReplace(t *testing.T) {
	r, snap := backUp(t, testImage(t))
	dir := t.TempDir()
	file := filepath.Join(dir, "kept.raw")
	if err := os.WriteFile(file, []byte("keep me"), 0o600); err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(dir, "a-directory")
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path      string
		overwrite bool
		want      error
	}{
		{file, false, restore.ErrTargetExists},
		{sub, true, restore.ErrTargetNotFile},
		{sub, false, restore.ErrTargetNotFile},
	} {
		_, err := restore.ToFile(context.Background(), r, snap, snap.Disks[0], c.path, restore.FileOptions{Overwrite: c.overwrite})
		if !errors.Is(err, c.want) {
			t.Errorf("%s (overwrite %v): %v, want %v", filepath.Base(c.path), c.overwrite, err, c.want)
		}
		if err := restore.CheckTarget(c.path, c.overwrite); !errors.Is(err, c.want) {
			t.Errorf("CheckTarget %s (overwrite %v): %v, want %v", filepath.Base(c.path), c.overwrite, err, c.want)
		}
		if _, err := os.Stat(c.path + ".coffer-partial"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: a partial file was left: %v", filepath.Base(c.path), err)
		}
	}
	if got, _ := os.ReadFile(file); string(got) != "keep me" {
		t.Errorf("the refused target was changed: %q", got)
	}
	if err := restore.CheckTarget(filepath.Join(dir, "new.raw"), false); err != nil {
		t.Errorf("a new file: %v", err)
	}
}
