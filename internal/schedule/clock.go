package schedule

import "time"

// Clock is the time the server's schedulers follow: when a slot is due,
// and how long to wait for the next.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// ServerClock is the clock of `coffer server`'s schedules (policies and
// maintenance): the system's. Only a test binary replaces it, before the
// server starts (internal/cli/clitest, from COFFER_TEST_CLOCK: see
// docs/13-development.md), to drive cron schedules through days of slots
// and daylight saving changes without waiting for them.
var ServerClock Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
