// Package storetest is the conformance suite every store backend passes. It
// checks the contract written in package store: atomic visibility, replace,
// conditional writes under races, ranges, listing and error mapping.
//
// A backend's test calls Run with a constructor returning an empty store.
package storetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/coffer-backup/coffer/internal/store"
)

// Run runs the whole suite. newStore must return an empty store; it is
// called once per subtest.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(*testing.T, store.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"Ranges", testRanges},
		{"Missing", testMissing},
		{"InvisibleUntilCommit", testInvisibleUntilCommit},
		{"Abort", testAbort},
		{"CancelledWrite", testCancelledWrite},
		{"Replace", testReplace},
		{"List", testList},
		{"Delete", testDelete},
		{"IfNotExists", testIfNotExists},
		{"IfMatch", testIfMatch},
		{"IfNotExistsRace", testIfNotExistsRace},
		{"IfMatchRace", testIfMatchRace},
		{"LargeStreamed", testLargeStreamed},
		{"ParallelWriters", testParallelWriters},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() { _ = s.Close() })
			tc.fn(t, s)
		})
	}
}

func random(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func put(t *testing.T, s store.Store, name string, data []byte) store.ObjectInfo {
	t.Helper()
	fi, err := store.Put(context.Background(), s, name, data, store.PutOptions{})
	if err != nil {
		t.Fatalf("put %s: %v", name, err)
	}
	return fi
}

func mustGet(t *testing.T, s store.Store, name string) []byte {
	t.Helper()
	b, err := store.Get(context.Background(), s, name, 0, -1)
	if err != nil {
		t.Fatalf("get %s: %v", name, err)
	}
	return b
}

func testRoundTrip(t *testing.T, s store.Store) {
	for i, size := range []int{0, 1, 4096, 1<<20 + 7} {
		name := fmt.Sprintf("data/%064x", i+1)
		data := random(t, size)
		fi := put(t, s, name, data)
		if fi.Size != int64(size) || fi.Name != name {
			t.Fatalf("commit info = %+v, want name %s size %d", fi, name, size)
		}
		if got := mustGet(t, s, name); !bytes.Equal(got, data) {
			t.Fatalf("%s: read back %d bytes differ from %d written", name, len(got), size)
		}
		st, err := s.Stat(context.Background(), name)
		if err != nil || st.Size != int64(size) || st.Version == "" {
			t.Fatalf("stat %s = %+v, %v", name, st, err)
		}
	}
}

func testRanges(t *testing.T, s store.Store) {
	data := random(t, 100000)
	put(t, s, "index/r", data)
	ctx := context.Background()
	for _, r := range [][2]int64{{0, 1}, {99999, 1}, {1234, 5678}, {0, 100000}, {50000, -1}, {100000, 0}} {
		got, err := store.Get(ctx, s, "index/r", r[0], r[1])
		if err != nil {
			t.Fatalf("range %v: %v", r, err)
		}
		end := int64(len(data))
		if r[1] >= 0 {
			end = r[0] + r[1]
		}
		if !bytes.Equal(got, data[r[0]:end]) {
			t.Fatalf("range %v: wrong bytes", r)
		}
	}
	for _, r := range [][2]int64{{99999, 2}, {100001, -1}} {
		_, err := store.Get(ctx, s, "index/r", r[0], r[1])
		if !errors.Is(err, store.ErrInvalidRange) {
			t.Fatalf("range %v beyond the end: err = %v, want ErrInvalidRange", r, err)
		}
	}
}

func testMissing(t *testing.T, s store.Store) {
	ctx := context.Background()
	if _, err := s.Stat(ctx, "snapshots/missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("stat missing: %v, want ErrNotFound", err)
	}
	if _, err := store.Get(ctx, s, "snapshots/missing", 0, -1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("read missing: %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "snapshots/missing"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete missing: %v, want ErrNotFound", err)
	}
}

func testInvisibleUntilCommit(t *testing.T, s store.Store) {
	ctx := context.Background()
	w, err := s.Create(ctx, "snapshots/pending", store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(random(t, 5000)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, "snapshots/pending"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("object visible before commit: stat err = %v", err)
	}
	if n := count(t, s, "snapshots/"); n != 0 {
		t.Fatalf("list shows %d objects before commit", n)
	}
	if _, err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	if n := count(t, s, "snapshots/"); n != 1 {
		t.Fatalf("list shows %d objects after commit, want 1", n)
	}
}

func testAbort(t *testing.T, s store.Store) {
	ctx := context.Background()
	w, err := s.Create(ctx, "data/aborted", store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(random(t, 1<<16)); err != nil {
		t.Fatal(err)
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(ctx, "data/aborted"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("aborted object exists: %v", err)
	}
	if n := count(t, s, ""); n != 0 {
		t.Fatalf("%d objects listed after abort", n)
	}
}

func testCancelledWrite(t *testing.T, s store.Store) {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := s.Create(ctx, "data/cancelled", store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write(random(t, 1000))
	cancel()
	_, _ = w.Write(random(t, 1000))
	if _, err := w.Commit(); err == nil {
		t.Fatal("commit after cancellation succeeded")
	}
	if _, err := s.Stat(context.Background(), "data/cancelled"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("cancelled object exists: %v", err)
	}
}

func testReplace(t *testing.T, s store.Store) {
	a := put(t, s, "locks/x", []byte("first"))
	b := put(t, s, "locks/x", []byte("second, longer"))
	if got := mustGet(t, s, "locks/x"); string(got) != "second, longer" {
		t.Fatalf("after replace read %q", got)
	}
	if a.Version == b.Version {
		t.Fatalf("version did not change on replace: %q", a.Version)
	}
}

func count(t *testing.T, s store.Store, prefix string) int {
	t.Helper()
	return len(names(t, s, prefix))
}

func names(t *testing.T, s store.Store, prefix string) []string {
	t.Helper()
	var out []string
	err := s.List(context.Background(), prefix, func(fi store.ObjectInfo) error {
		out = append(out, fi.Name)
		return nil
	})
	if err != nil {
		t.Fatalf("list %q: %v", prefix, err)
	}
	sort.Strings(out)
	return out
}

func testList(t *testing.T, s store.Store) {
	all := []string{"config", "keys/k1", "keys/k2", "data/ab01", "data/ab02", "data/cd03", "snapshots/s1", "maps/s1-0"}
	for _, n := range all {
		put(t, s, n, []byte(n))
	}
	sort.Strings(all)
	cases := map[string][]string{
		"":          all,
		"keys/":     {"keys/k1", "keys/k2"},
		"data/":     {"data/ab01", "data/ab02", "data/cd03"},
		"data/ab":   {"data/ab01", "data/ab02"},
		"data/ab02": {"data/ab02"},
		"conf":      {"config"},
		"nothing/":  nil,
	}
	for prefix, want := range cases {
		got := names(t, s, prefix)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("list %q = %v, want %v", prefix, got, want)
		}
	}
	stop := errors.New("stop")
	seen := 0
	err := s.List(context.Background(), "", func(store.ObjectInfo) error { seen++; return stop })
	if !errors.Is(err, stop) || seen != 1 {
		t.Fatalf("callback error not propagated: err=%v after %d calls", err, seen)
	}
}

func testDelete(t *testing.T, s store.Store) {
	put(t, s, "data/gone", []byte("x"))
	if err := s.Delete(context.Background(), "data/gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Stat(context.Background(), "data/gone"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted object still there: %v", err)
	}
}

func testIfNotExists(t *testing.T, s store.Store) {
	if !s.Properties().ConditionalWrites {
		t.Skip("backend declares no conditional writes")
	}
	ctx := context.Background()
	opts := store.PutOptions{IfNotExists: true}
	if _, err := store.Put(ctx, s, "locks/excl", []byte("mine"), opts); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, s, "locks/excl", []byte("theirs"), opts); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second conditional create: %v, want ErrExists", err)
	}
	if got := mustGet(t, s, "locks/excl"); string(got) != "mine" {
		t.Fatalf("conditional create overwrote: %q", got)
	}
}

func testIfMatch(t *testing.T, s store.Store) {
	if !s.Properties().ConditionalWrites {
		t.Skip("backend declares no conditional writes")
	}
	ctx := context.Background()
	v1 := put(t, s, "locks/cas", []byte("v1"))
	v2, err := store.Put(ctx, s, "locks/cas", []byte("v2"), store.PutOptions{IfMatch: v1.Version})
	if err != nil {
		t.Fatalf("matching IfMatch: %v", err)
	}
	if _, err := store.Put(ctx, s, "locks/cas", []byte("v3"), store.PutOptions{IfMatch: v1.Version}); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("stale IfMatch: %v, want ErrPreconditionFailed", err)
	}
	if got := mustGet(t, s, "locks/cas"); string(got) != "v2" {
		t.Fatalf("stale IfMatch overwrote: %q", got)
	}
	_, err = store.Put(ctx, s, "locks/none", []byte("x"), store.PutOptions{IfMatch: v2.Version})
	if !errors.Is(err, store.ErrPreconditionFailed) && !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("IfMatch on a missing object: %v", err)
	}
}

func testIfNotExistsRace(t *testing.T, s store.Store) {
	if !s.Properties().ConditionalWrites {
		t.Skip("backend declares no conditional writes")
	}
	var wins atomic.Int32
	race(t, 8, func(i int) error {
		_, err := store.Put(context.Background(), s, "locks/race", []byte{byte(i)}, store.PutOptions{IfNotExists: true})
		if err == nil {
			wins.Add(1)
			return nil
		}
		if errors.Is(err, store.ErrExists) {
			return nil
		}
		return err
	})
	if wins.Load() != 1 {
		t.Fatalf("%d writers won a conditional create, want exactly 1", wins.Load())
	}
}

func testIfMatchRace(t *testing.T, s store.Store) {
	if !s.Properties().ConditionalWrites {
		t.Skip("backend declares no conditional writes")
	}
	base := put(t, s, "locks/casrace", []byte("base"))
	var wins atomic.Int32
	race(t, 8, func(i int) error {
		_, err := store.Put(context.Background(), s, "locks/casrace", []byte{byte(i)}, store.PutOptions{IfMatch: base.Version})
		if err == nil {
			wins.Add(1)
			return nil
		}
		if errors.Is(err, store.ErrPreconditionFailed) {
			return nil
		}
		return err
	})
	if wins.Load() != 1 {
		t.Fatalf("%d writers won a compare-and-swap, want exactly 1", wins.Load())
	}
}

// race runs fn concurrently n times, releasing all goroutines at once.
func race(t *testing.T, n int, fn func(i int) error) {
	t.Helper()
	start := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs <- fn(i)
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

func testLargeStreamed(t *testing.T, s store.Store) {
	const size = 40<<20 + 123
	ctx := context.Background()
	w, err := s.Create(ctx, "data/large", store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src := io.LimitReader(rand.Reader, size)
	h1 := newDigest()
	if _, err := io.CopyBuffer(io.MultiWriter(w, h1), src, make([]byte, 300<<10)); err != nil {
		t.Fatal(err)
	}
	fi, err := w.Commit()
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size != size {
		t.Fatalf("size %d, want %d", fi.Size, size)
	}
	rc, err := s.Read(ctx, "data/large", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	h2 := newDigest()
	if _, err := io.Copy(h2, rc); err != nil {
		t.Fatal(err)
	}
	if h1.sum() != h2.sum() {
		t.Fatal("streamed object read back differently")
	}
}

func testParallelWriters(t *testing.T, s store.Store) {
	payload := map[string][]byte{}
	for i := range 16 {
		payload[fmt.Sprintf("data/p%02d", i)] = random(t, 256<<10+i)
	}
	var mu sync.Mutex
	i := 0
	keys := make([]string, 0, len(payload))
	for k := range payload {
		keys = append(keys, k)
	}
	race(t, len(keys), func(int) error {
		mu.Lock()
		k := keys[i]
		i++
		mu.Unlock()
		_, err := store.Put(context.Background(), s, k, payload[k], store.PutOptions{})
		return err
	})
	for k, v := range payload {
		if !bytes.Equal(mustGet(t, s, k), v) {
			t.Fatalf("%s differs after parallel writes", k)
		}
	}
}
