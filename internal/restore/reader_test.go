package restore

import (
	"testing"

	"github.com/coffer-backup/coffer/internal/id"
)

// The chunk cache is budgeted in bytes: with larger chunks it holds fewer
// of them, so its memory does not grow with the repository's chunk size
// (it did: 256 chunks were 256 MiB with 1 MiB chunks but 1 GiB with 4 MiB).
func TestCacheChunksBudget(t *testing.T) {
	for _, c := range []struct {
		budget int64
		chunk  int
		want   int
	}{
		{256 << 20, 1 << 20, 256},
		{256 << 20, 4 << 20, 64},
		{256 << 20, 16 << 20, 16},
		{256 << 20, 64 << 10, 4096},
		{64 << 20, 1 << 20, 64},
		{1 << 20, 16 << 20, 2}, // never below 2
		{256 << 20, 0, 256},    // unknown chunk size: the 1 MiB default
	} {
		if got := CacheChunks(c.budget, c.chunk); got != c.want {
			t.Errorf("CacheChunks(%d, %d) = %d, want %d", c.budget, c.chunk, got, c.want)
		}
		cs := int64(c.chunk)
		if cs == 0 {
			cs = 1 << 20
		}
		if n := CacheChunks(c.budget, c.chunk); n > 2 && int64(n)*cs > c.budget {
			t.Errorf("CacheChunks(%d, %d) = %d exceeds the budget", c.budget, c.chunk, n)
		}
	}
}

func TestChunkCacheEvicts(t *testing.T) {
	c := newChunkCache(CacheChunks(8<<20, 4<<20))
	for i := range 5 {
		var x id.ID
		x[0] = byte(i)
		c.put(x, make([]byte, 4<<20))
	}
	if n := c.order.Len(); n != 2 {
		t.Fatalf("cache holds %d chunks of 4 MiB with an 8 MiB budget, want 2", n)
	}
}
