package cache

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"testing"

	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/local"
	"github.com/coffer-backup/coffer/internal/store/storetest"
)

func newCache(t *testing.T, o Options) (*Store, *local.Store) {
	inner, err := local.Create(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(inner, t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	return c, inner
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		c, _ := newCache(t, Options{MaxBytes: 64 << 20})
		return c
	})
}

func TestHitsMissesAndVersions(t *testing.T) {
	ctx := context.Background()
	c, inner := newCache(t, Options{MaxBytes: 64 << 20})
	seg := make([]byte, 100000)
	_, _ = rand.Read(seg)
	if _, err := store.Put(ctx, c, "index/s1", seg, store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 { // ranges of an index segment: one download
		got, err := store.Get(ctx, c, "index/s1", int64(i)*1000, 500)
		if err != nil || !bytes.Equal(got, seg[i*1000:i*1000+500]) {
			t.Fatalf("range %d: %v", i, err)
		}
	}
	if c.Misses != 1 || c.Hits != 2 {
		t.Fatalf("index: %d misses, %d hits; want 1 and 2", c.Misses, c.Hits)
	}
	// A manifest is cached per version: a rewrite by another process
	// (straight to the inner store) is seen after the next listing.
	if _, err := store.Put(ctx, inner, "snapshots/a", []byte("v1"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	list := func() { _ = c.List(ctx, "snapshots/", func(store.ObjectInfo) error { return nil }) }
	list()
	for range 2 {
		if b, _ := store.Get(ctx, c, "snapshots/a", 0, -1); string(b) != "v1" {
			t.Fatalf("read %q", b)
		}
	}
	if _, err := store.Put(ctx, inner, "snapshots/a", []byte("v2, rewritten"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	list()
	if b, _ := store.Get(ctx, c, "snapshots/a", 0, -1); string(b) != "v2, rewritten" {
		t.Fatalf("stale manifest %q after rewrite", b)
	}
	// Packs never enter the cache.
	_, _ = store.Put(ctx, c, "data/p", seg, store.PutOptions{})
	_, _ = store.Get(ctx, c, "data/p", 0, -1)
	if c.Misses != 3 {
		t.Fatalf("%d misses; packs must bypass the cache", c.Misses)
	}
}

func TestBoundedBySize(t *testing.T) {
	ctx := context.Background()
	c, _ := newCache(t, Options{MaxBytes: 1 << 20})
	obj := make([]byte, 300<<10)
	for i := range 10 {
		name := fmt.Sprintf("maps/m%d", i)
		if _, err := store.Put(ctx, c, name, obj, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := store.Get(ctx, c, name, 0, -1); err != nil {
			t.Fatal(err)
		}
		if c.total > 1<<20 {
			t.Fatalf("cache holds %d bytes, bound 1 MiB", c.total)
		}
	}
	var onDisk int64
	des, _ := os.ReadDir(c.dir)
	for _, de := range des {
		fi, _ := de.Info()
		onDisk += fi.Size()
	}
	if onDisk > 1<<20 || onDisk == 0 {
		t.Fatalf("%d bytes on disk", onDisk)
	}
	// The most recent map is still cached; the first was evicted.
	h := c.Hits
	_, _ = store.Get(ctx, c, "maps/m9", 0, -1)
	_, _ = store.Get(ctx, c, "maps/m0", 0, -1)
	if c.Hits != h+1 {
		t.Fatalf("LRU order wrong: %d hits, want %d", c.Hits, h+1)
	}
	// A cache whose filesystem must keep more free space than it has
	// caches nothing and still serves reads.
	full, _ := newCache(t, Options{MaxBytes: 1 << 20, MinFree: 1 << 62})
	_, _ = store.Put(ctx, full, "maps/x", obj, store.PutOptions{})
	if b, err := store.Get(ctx, full, "maps/x", 0, -1); err != nil || len(b) != len(obj) || full.total != 0 {
		t.Fatalf("cache over the free-space bound: %v, %d cached", err, full.total)
	}
}
