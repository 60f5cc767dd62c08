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

// newTotal is the engine-wide bucket: one limiter for the engine's life,
// so that a reload changes the rate of the tasks running too.
func newTotal(r policy.ByteRate) *rate.Limiter {
	l := rate.NewLimiter(rate.Inf, 1<<20)
	setRate(l, r)
	return l
}

// setRate sets a bucket's rate and burst as newBucket would make them;
// 0 is unlimited (a burst is kept: limiter splits requests by it).
func setRate(l *rate.Limiter, r policy.ByteRate) {
	if r <= 0 {
		l.SetLimit(rate.Inf)
		l.SetBurst(1 << 20)
		return
	}
	l.SetLimit(rate.Limit(r))
	l.SetBurst(max(int(r), 1<<20))
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
