package maintenance

import (
	"time"

	"github.com/robfig/cron/v3"
)

// A verify with read-data-period P reads, at each run, one share of the
// packs: periods are P long, counted from the Unix epoch (so every server
// and every restart agrees on them without remembering anything); the
// runs the schedule makes within a period are numbered 1..N, and run k
// reads the packs whose ID hashes into group k of N (verify's
// SubsetNum/SubsetDen). The groups partition the packs, so the N runs of
// a period read every pack exactly once. A run that did not happen (the
// server was down, outside its window) leaves its share unread until the
// same share's turn in the next period.

// Share is the share of a run at slot: run num of den in its period.
func Share(sc cron.Schedule, period time.Duration, slot time.Time) (num, den int) {
	start := periodStart(period, slot)
	for t := sc.Next(start.Add(-time.Nanosecond)); !t.IsZero() && t.Before(start.Add(period)) && den <= maxShares; t = sc.Next(t) {
		den++
		if !t.After(slot) {
			num = den
		}
	}
	if num == 0 { // a slot the schedule does not name: read the first share
		num = 1
	}
	return num, max(den, 1)
}

// RunsPerPeriod is how many runs the schedule makes in the period that
// holds t (up to maxShares+1).
func RunsPerPeriod(sc cron.Schedule, period time.Duration, t time.Time) int {
	_, den := Share(sc, period, t)
	start := periodStart(period, t)
	if first := sc.Next(start.Add(-time.Nanosecond)); first.IsZero() || !first.Before(start.Add(period)) {
		return 0
	}
	return den
}

// periodStart is the start of the period of length period holding t,
// periods being counted from the Unix epoch.
func periodStart(period time.Duration, t time.Time) time.Time {
	n := t.UnixNano() / int64(period)
	if t.UnixNano() < 0 && t.UnixNano()%int64(period) != 0 {
		n--
	}
	return time.Unix(0, n*int64(period)).In(t.Location())
}
