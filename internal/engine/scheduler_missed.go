package engine

import (
	"context"
	"fmt"
	"time"
)

// maxMissed bounds the slots counted as missed for one policy (an
// "@every 1s" schedule over a long outage): the record says "at least".
const maxMissed = 100000

// recordMissed records, for each policy of list, the slots its schedule
// named after the catalog's newest claimed one and up to now, which no
// server ran because none led the schedules (the leader died and the
// lease had not passed yet, or every server was down): one skipped run
// per policy, at the newest missed slot, naming them and the run that
// goes on if a dead leader's run was resumed (Running). The newest
// missed slot is claimed first, so that of several servers taking the
// schedules over in turn one records it. A policy never run before has
// missed nothing.
func (s *Scheduler) recordMissed(ctx context.Context, list []*scheduled, now time.Time) {
	if s.LastRun == nil {
		return
	}
	for _, e := range list {
		last, ok, err := s.LastRun(ctx, "policy/"+e.p.Name)
		if err != nil {
			s.Engine.log.Warn("the slots missed before this server ran the schedules cannot be known: not recorded", "policy", e.p.Name, "err", err)
			continue
		}
		if !ok {
			continue
		}
		first, newest, n := missedSlots(e, last, now)
		if n == 0 || !s.claim(ctx, e.p, newest) {
			continue
		}
		count := fmt.Sprint(n)
		if n >= maxMissed {
			count = "at least " + count
		}
		msg := fmt.Sprintf("skipped: %s scheduled run(s) of policy %s, from %s to %s, came while no server ran the schedules",
			count, e.p.Name, first.UTC().Format(time.RFC3339), newest.UTC().Format(time.RFC3339))
		fields := map[string]any{"missed": n, "first_slot": first.UTC().Format(time.RFC3339), "last_claimed": last.UTC().Format(time.RFC3339)}
		if r := s.resumed(e.p.Name); r.Job != nil {
			msg += fmt.Sprintf("; the run of job %d, interrupted with its server, goes on as job %d", r.Resumes, r.Job.ID())
			fields["running_job"], fields["interrupted_job"] = r.Job.ID(), r.Resumes
		} else {
			msg += fmt.Sprintf(" (the last run claimed was the slot of %s)", last.UTC().Format(time.RFC3339))
		}
		s.Engine.recordSkipped(ctx, e.p, msg, newest, fields)
	}
}

// missedSlots are the slots of e's schedule after last and not after now:
// the first, the newest and how many (at most maxMissed).
func missedSlots(e *scheduled, last, now time.Time) (first, newest time.Time, n int) {
	for t := e.sched.Next(last); !t.IsZero() && !t.After(now) && n < maxMissed; t = e.sched.Next(t) {
		if n == 0 {
			first = t
		}
		newest = t
		n++
	}
	return first, newest, n
}
