package mediacopy_test

import (
	"bytes"
	"context"
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

// drives opens a library of n drives and cartridges blank cartridges.
func drives(t *testing.T, n, cartridges int, capacity int64) []*volume.Library {
	t.Helper()
	dir := t.TempDir()
	if err := vtl.Create(dir, vtl.Config{Drives: n, Slots: cartridges, Capacity: capacity}); err != nil {
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
	var out []*volume.Library
	for i := range n {
		d, _ := l.Drive(i)
		out = append(out, &volume.Library{Changer: l, Drive: d, DriveIndex: i})
	}
	return out
}

// Points copied through two drives at once: a session per drive, the
// points dealt out so that each drive has about half the bytes, no
// cartridge written by both drives although both span volumes at the
// same time, and every point restores from the tape alone through one
// drive, which takes back the cartridges left in the other.
func TestCopyThroughTwoDrives(t *testing.T) {
	ctx := context.Background()
	src := repotest.New(t, repo.InitOptions{ChunkSize: 64 << 10})
	var snaps []*repo.Point
	disks := map[string][]byte{}
	for i, size := range []int{900 << 10, 700 << 10, 500 << 10, 400 << 10} {
		path, disk := image(t, uint64(10+i), size)
		snap := backuptest.BackupImage(t, src, path, backup.Options{})
		snaps = append(snaps, snap)
		disks[snap.ID.String()] = disk
	}
	libs := drives(t, 2, 8, 600<<10) // every session spans volumes
	results, err := mediacopy.CopyOnDrives(ctx, src, snaps, libs, mediacopy.CopyOptions{Pool: "offsite", BlockSize: 32 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || results[0] == nil || results[1] == nil || results[0].Session == results[1].Session {
		t.Fatalf("sessions: %+v", results)
	}
	var all []format.VolumeIndex
	byDrive := map[string]int{}
	for d, res := range results {
		if len(res.Volumes) < 2 {
			t.Fatalf("drive %d wrote %d volume(s); the test wants every session to span", d, len(res.Volumes))
		}
		var points int
		for _, ix := range res.Volumes {
			if other, ok := byDrive[ix.Label.Barcode]; ok && other != d {
				t.Fatalf("cartridge %s written by drives %d and %d", ix.Label.Barcode, other, d)
			}
			byDrive[ix.Label.Barcode] = d
			for _, s := range ix.Segments {
				if s.Session == res.Session && s.End {
					points++
				}
			}
		}
		if points != 2 { // 900+400 KiB and 700+500 KiB
			t.Fatalf("drive %d ended %d point(s), want 2 of the 4", d, points)
		}
		all = append(all, res.Volumes...)
	}
	if err := os.RemoveAll(src.Store().Properties().Location); err != nil {
		t.Fatal(err)
	}
	for _, snap := range snaps {
		segs, err := mediacopy.Choose(placedOf(all, snap.ID.String()))
		if err != nil {
			t.Fatal(err)
		}
		staged, err := mediacopy.Stage(ctx, libs[0], segs, t.TempDir(), []byte(repotest.Password), volume.ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "restored.img")
		if _, err := restore.ToFile(ctx, staged.Repo, staged.Point, staged.Point.Disks[0], out, restore.FileOptions{}); err != nil {
			t.Fatal(err)
		}
		staged.Close()
		if got, err := os.ReadFile(out); err != nil || !bytes.Equal(got, disks[snap.ID.String()]) {
			t.Fatalf("point %s restores wrong from two drives' tapes (%v)", snap.ID.Short(), err)
		}
	}
}
