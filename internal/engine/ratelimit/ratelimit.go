// Package ratelimit holds the engine's byte-rate buckets: the engine-wide
// one, each task's own, and the limiter that waits on several of them.
package ratelimit

import (
	"context"
	"time"

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

// NewTotal is the engine-wide bucket: one limiter for the engine's life,
// so that a reload changes the rate of the tasks running too.
func NewTotal(r policy.ByteRate) *rate.Limiter {
	l := rate.NewLimiter(rate.Inf, 1<<20)
	SetRate(l, r)
	return l
}

// SetRate sets a bucket's rate and burst as newBucket would make them;
// 0 is unlimited (a burst is kept: limiter splits requests by it).
func SetRate(l *rate.Limiter, r policy.ByteRate) {
	if r <= 0 {
		l.SetLimit(rate.Inf)
		l.SetBurst(1 << 20)
		return
	}
	l.SetLimit(rate.Limit(r))
	l.SetBurst(max(int(r), 1<<20))
}

// Limiter waits on every bucket it holds (the engine-wide one and the
// task's own), splitting requests larger than a bucket's burst, which
// rate.Limiter would otherwise refuse.
type Limiter []*rate.Limiter

var _ backup.RateLimiter = Limiter(nil)

func (l Limiter) WaitN(ctx context.Context, n int) error {
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

// Task combines the total bucket with a new per-task bucket; nil
// when neither limits anything.
func Task(total *rate.Limiter, perTask policy.ByteRate) backup.RateLimiter {
	return task(total, perTask, false)
}

// Shared is Task for a task whose rate is its share of a rate that tasks
// in other processes share too (engine.Placement.Rate): its own bucket
// starts empty, so that tasks starting at once do not each read a burst
// beyond their share, and their reads add up to at most the rate.
func Shared(total *rate.Limiter, perTask policy.ByteRate) backup.RateLimiter {
	return task(total, perTask, true)
}

func task(total *rate.Limiter, perTask policy.ByteRate, empty bool) backup.RateLimiter {
	var l Limiter
	if total != nil {
		l = append(l, total)
	}
	if b := newBucket(perTask); b != nil {
		if empty {
			b.AllowN(time.Now(), b.Burst())
		}
		l = append(l, b)
	}
	if len(l) == 0 {
		return nil
	}
	return l
}

// Min is the lower of two rates, 0 being unlimited.
func Min(a, b policy.ByteRate) policy.ByteRate {
	switch {
	case a <= 0:
		return max(b, 0)
	case b <= 0:
		return a
	default:
		return min(a, b)
	}
}
