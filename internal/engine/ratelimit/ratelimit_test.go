package ratelimit

import (
	"context"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/policy"
)

// A task's own bucket lets its first second through at once; a shared
// task's starts empty, so its first read waits for its rate.
func TestSharedBucketStartsEmpty(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := Task(nil, 1<<20).WaitN(ctx, 512<<10); err != nil {
		t.Fatalf("a task's first 512 KiB at 1 MiB/s waited: %v", err)
	}
	// rate.Limiter refuses at once a wait that would outlast ctx.
	if err := Shared(nil, 1<<20).WaitN(ctx, 512<<10); err == nil {
		t.Fatal("a shared task's first 512 KiB at 1 MiB/s went through within 100 ms")
	}
	if Task(nil, 0) != nil || Shared(nil, 0) != nil {
		t.Fatal("no rate gave a limiter")
	}
}

func TestMinTakesZeroAsUnlimited(t *testing.T) {
	for _, c := range [][3]int64{{0, 0, 0}, {0, 5, 5}, {5, 0, 5}, {3, 5, 3}, {5, 3, 3}} {
		if got := Min(policy.ByteRate(c[0]), policy.ByteRate(c[1])); int64(got) != c[2] {
			t.Errorf("Min(%d, %d) = %d, want %d", c[0], c[1], got, c[2])
		}
	}
}
