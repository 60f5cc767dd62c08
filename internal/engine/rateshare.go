package engine

import (
	"golang.org/x/time/rate"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/engine/ratelimit"
	"github.com/coffer-backup/coffer/internal/policy"
)

// rateShare is the most bytes/s unit u may read while the engine has
// workers: its share of limits.rate, rate × its slots of the global pool
// / the pool's size. limits.rate is one bucket in one process; attempts
// on workers read in other processes, which no bucket of this one
// reaches. The global pool bounds the attempts in flight across the
// fleet (the workers' and this process's), so their shares add up to at
// most rate however they are spread. Without workers it is 0: the
// engine-wide bucket shares rate among this process's attempts as they
// come and go. The cost: in a fleet, fewer attempts at once than the pool
// allows read less than rate in total.
func (j *Job) rateShare(u *unit) policy.ByteRate {
	l := j.s.limits
	if l.Rate <= 0 || !u.inFleet || l.Tasks <= 0 {
		return 0
	}
	slots := 0
	for _, n := range u.needs {
		if n.r != nil && n.r.key == "global" {
			slots += n.n
		}
	}
	return max(l.Rate*policy.ByteRate(max(slots, 1))/policy.ByteRate(l.Tasks), 1)
}

// taskLimiter is an attempt's limiter in this process: the engine-wide
// bucket and its own at perTask, which starts empty when the attempt
// reads a share of the fleet's rate (ratelimit.Shared).
func taskLimiter(total *rate.Limiter, perTask, share policy.ByteRate) backup.RateLimiter {
	if share > 0 {
		return ratelimit.Shared(total, perTask)
	}
	return ratelimit.Task(total, perTask)
}
