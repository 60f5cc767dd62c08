package extsort

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"syscall"
	"testing"

	"github.com/coffer-backup/coffer/internal/testutil"
)

func TestSortsAcrossRunsAndDedups(t *testing.T) {
	for _, budget := range []int{1 << 20, 8 * 1024 * 3} { // in memory, and many spilled runs
		dir := t.TempDir()
		s := New(8, budget, dir)
		rng := rand.New(rand.NewPCG(7, 9))
		want := map[uint64]bool{}
		for range 50000 {
			v := rng.Uint64N(20000) // many duplicates
			want[v] = true
			var b [8]byte
			binary.BigEndian.PutUint64(b[:], v)
			if err := s.Add(b[:]); err != nil {
				t.Fatal(err)
			}
		}
		var prev []byte
		n := 0
		err := s.Iterate(true, func(rec []byte) error {
			if prev != nil && bytes.Compare(prev, rec) >= 0 {
				t.Fatalf("not strictly ascending at %d", n)
			}
			prev = append(prev[:0], rec...)
			n++
			return nil
		})
		if err != nil || n != len(want) {
			t.Fatalf("budget %d: %d unique records, want %d (%v)", budget, n, len(want), err)
		}
		if left, _ := os.ReadDir(dir); len(left) != 0 { // runs are unnamed files
			t.Fatalf("%d run files left behind", len(left))
		}
	}
}

func TestKeepsDuplicatesWhenAsked(t *testing.T) {
	s := New(1, 1024, t.TempDir())
	for _, c := range []byte("banana") {
		_ = s.Add([]byte{c})
	}
	var got []byte
	_ = s.Iterate(false, func(r []byte) error { got = append(got, r[0]); return nil })
	if string(got) != "aaabnn" {
		t.Fatalf("got %q", got)
	}
}

// TestSpillToAFullFilesystemFails: a run that cannot be written is an
// error, never a shorter run (the garbage collector would then miss chunk
// IDs and delete chunks that points need).
func TestSpillToAFullFilesystemFails(t *testing.T) {
	testutil.RequireRoot(t)
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	s := New(8, 64<<10, dir) // runs of 64 KiB: the fifth does not fit
	var err error
	for i := range uint64(1 << 17) { // 1 MiB of records
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], i)
		if err = s.Add(b[:]); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.ENOSPC) {
		n := 0
		ierr := s.Iterate(false, func([]byte) error { n++; return nil })
		t.Fatalf("adding 1 MiB of records to a 256 KiB filesystem: %v; Iterate then gives %d of %d records (%v)", err, n, 1<<17, ierr)
	}
}
