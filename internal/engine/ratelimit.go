package engine

import (
	"context"

	"golang.org/x/time/rate"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/policy"
)

// newBucket returns a token bucket of bytes per second, or nil for
// unlimited. The burst is one second's worth (at least 1 MiB), so a
// throttled stream moves smoothly instead of in large bursts.
func newBucket(r policy.ByteRate) *rate.Limiter {
	if r <= 0 {
		return nil
	}
	return rate.NewLimiter(rate.Limit(r), max(int(r), 1<<20))
}

// limiter waits on every bucket it holds (the engine-wide one and the
// task's own), splitting requests larger than a bucket's burst, which
// rate.Limiter would otherwise refuse.
type limiter []*rate.Limiter

var _ backup.RateLimiter = limiter(nil)

func (l limiter) WaitN(ctx context.Context, n int) error {
	for _, b := range l {
		for left := n; left > 0; {
			step := min(left, b.Burst())
			if err := b.WaitN(ctx, step); err != nil {
				return err
			}
			left -= step
		}
	}
	return nil
}

// taskLimiter combines the total bucket with a new per-task bucket; nil
// when neither limits anything.
func taskLimiter(total *rate.Limiter, perTask policy.ByteRate) backup.RateLimiter {
	var l limiter
	if total != nil {
		l = append(l, total)
	}
	if b := newBucket(perTask); b != nil {
		l = append(l, b)
	}
	if len(l) == 0 {
		return nil
	}
	return l
}
