package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// putInPieces writes data as one object announced as large (a pack), in
// writes of an odd size so blocks fill across write boundaries.
func putInPieces(t *testing.T, s *Store, name string, data []byte) (*writer, error) {
	t.Helper()
	ow, err := s.Create(context.Background(), name, store.PutOptions{SizeHint: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	w := ow.(*writer)
	for p := data; len(p) > 0; {
		n := min(len(p), 100003)
		if _, err := w.Write(p[:n]); err != nil {
			_ = w.Abort()
			return w, err
		}
		p = p[n:]
	}
	_, err = w.Commit()
	return w, err
}

func readAll(t *testing.T, s *Store, name string) []byte {
	t.Helper()
	rc, err := s.Read(context.Background(), name, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Large objects are written past the page cache where the filesystem
// allows it (ext4 here) and through it where it does not (tmpfs); either
// way every size round-trips exactly, tails and block boundaries included.
func TestLargeObjectsRoundTrip(t *testing.T) {
	dirs := map[string]string{"disk": t.TempDir()}
	if shm, err := os.MkdirTemp("/dev/shm", "coffer-direct-"); err == nil {
		t.Cleanup(func() { os.RemoveAll(shm) })
		dirs["tmpfs"] = shm
	}
	for fs, dir := range dirs {
		t.Run(fs, func(t *testing.T) {
			s, err := Create(dir)
			if err != nil {
				t.Fatal(err)
			}
			for i, size := range []int{0, 10, 4096, 4097, directBlock - 1, directBlock, 2*directBlock + 12345} {
				data := make([]byte, size)
				_, _ = rand.Read(data)
				name := "data/ab" + string(rune('a'+i))
				w, err := putInPieces(t, s, name, data)
				if err != nil {
					t.Fatalf("%d bytes: %v", size, err)
				}
				if fs == "disk" && w.direct == nil {
					t.Fatal("no O_DIRECT descriptor on a disk filesystem")
				}
				if got := readAll(t, s, name); !bytes.Equal(got, data) {
					t.Fatalf("%d bytes: read back %d bytes, different", size, len(got))
				}
			}
		})
	}
}

// Aborting a large object with a block in flight leaves no temp file, and
// the store keeps writing correctly afterwards (its buffers are reused).
func TestLargeObjectAbort(t *testing.T) {
	dir := t.TempDir()
	s, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.Create(context.Background(), "data/abc1", store.PutOptions{SizeHint: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 3*directBlock+5)
	_, _ = rand.Read(data)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(filepath.Join(dir, "tmp")); len(left) != 0 {
		t.Fatalf("abort left %d temp files", len(left))
	}
	if _, err := putInPieces(t, s, "data/abc2", data); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readAll(t, s, "data/abc2"), data) {
		t.Fatal("object written after an abort reads back wrong")
	}
}

// A disk filling up under O_DIRECT writes fails the object with ErrNoSpace
// (the message the CLI turns into its no-space advice) and leaves no temp
// file; smaller objects still fit afterwards.
func TestLargeObjectNoSpace(t *testing.T) {
	testutil.RequireRoot(t)
	img := filepath.Join(t.TempDir(), "fs.img")
	if out, err := exec.Command("mkfs.ext4", "-q", img, "16M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v %s", err, out)
	}
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		if testutil.Strict() {
			t.Fatalf("mount: %v %s", err, out)
		}
		t.Skipf("cannot loop-mount here: %s", out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", mnt).Run() })
	s, err := Create(filepath.Join(mnt, "repo"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() }) // before the unmount: it holds a lock file
	data := make([]byte, 5*directBlock)
	_, _ = rand.Read(data)
	if _, err := putInPieces(t, s, "data/abff", data); !errors.Is(err, store.ErrNoSpace) {
		t.Fatalf("a 20 MiB object on a 16 MiB filesystem: %v, want ErrNoSpace", err)
	}
	if left, _ := os.ReadDir(filepath.Join(mnt, "repo", "tmp")); len(left) != 0 {
		t.Fatalf("the failed object left %d temp files", len(left))
	}
	if _, err := putInPieces(t, s, "data/abfe", data[:directBlock+1]); err != nil {
		t.Fatalf("a 4 MiB object after the failure: %v", err)
	}
}
