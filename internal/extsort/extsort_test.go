package extsort

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
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

// TestBufferStaysWithinBudget: the buffer is the budget and never grows
// past it, and the spilled runs still merge when there are more of them
// than the budget can buffer at once.
func TestBufferStaysWithinBudget(t *testing.T) {
	const size, budget = 16, 64 << 10
	s := New(size, budget, t.TempDir())
	rng := rand.New(rand.NewPCG(1, 2))
	var rec [size]byte
	n := 0
	for range 100000 { // 1.6 MB: 25 runs, more than a 64 KiB budget merges at once
		binary.BigEndian.PutUint64(rec[:], rng.Uint64())
		if err := s.Add(rec[:]); err != nil {
			t.Fatal(err)
		}
		if cap(s.buf) > budget {
			t.Fatalf("buffer capacity %d over the %d budget", cap(s.buf), budget)
		}
	}
	if len(s.runs) <= budget/minRunBuffer {
		t.Fatalf("%d runs: the test needs more than one merge pass", len(s.runs))
	}
	var prev []byte
	err := s.Iterate(false, func(r []byte) error {
		if prev != nil && bytes.Compare(prev, r) > 0 {
			t.Fatalf("record %d out of order", n)
		}
		prev = append(prev[:0], r...)
		n++
		return nil
	})
	if err != nil || n != 100000 {
		t.Fatalf("%d records back, want 100000 (%v)", n, err)
	}
}

func TestOrderedReplaysAndRefusesDisorder(t *testing.T) {
	o, err := NewOrdered(2, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{"aa", "ab", "ab", "ba"} {
		if err := o.Add([]byte(r)); err != nil {
			t.Fatal(err)
		}
	}
	if err := o.Add([]byte("az")); err == nil {
		t.Fatal("a record smaller than the previous one was accepted")
	}
	c, err := o.Cursor()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for pass := range 2 {
		var got []string
		for ; c.Valid(); _ = c.Next() {
			got = append(got, string(c.Record()))
		}
		if strings.Join(got, ",") != "aa,ab,ab,ba" {
			t.Fatalf("pass %d: %v", pass, got)
		}
		if err := c.Rewind(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEachStopsAtAnError(t *testing.T) {
	o, err := NewOrdered(1, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range "abcd" {
		_ = o.Add([]byte{byte(r)})
	}
	c, err := o.Cursor()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stop := errors.New("stop")
	var seen string
	err = c.Each(func(rec []byte) error {
		seen += string(rec)
		if rec[0] == 'b' {
			return stop
		}
		return nil
	})
	if err != stop || seen != "ab" || string(c.Record()) != "b" {
		t.Fatalf("Each: %v after %q, cursor on %q; want the error after \"ab\", cursor still on b", err, seen, c.Record())
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
