package auth

import (
	"time"

	"github.com/coffer-backup/coffer/internal/auth/throttlekey"
	"github.com/coffer-backup/coffer/internal/catalog"
)

// ThrottlePolicy limits failed sign-ins for one key (a user name, or a
// remote address): Free attempts in a row may fail; from then on every
// attempt, failed or in flight, locks the key for Base, doubling with each
// further one up to Max. A key quiet for Forget after its last failure
// (and after its lock) starts again from zero. A successful sign-in clears
// its user's count.
type ThrottlePolicy struct {
	Free   int
	Base   time.Duration
	Max    time.Duration
	Forget time.Duration
}

// The default policies. A user name is locked after 5 failures in a row,
// for at most 15 minutes at a time, so that an attacker guessing one
// account's password gets a few hundred tries a day while the owner,
// locked out by the attack, waits minutes (and sessions and API tokens
// keep working). An address gets more room (one office behind one NAT)
// but is locked for up to an hour: it is the attacker's, spraying many
// user names.
var (
	DefaultUserThrottle    = ThrottlePolicy{Free: 5, Base: 30 * time.Second, Max: 15 * time.Minute, Forget: time.Hour}
	DefaultAddressThrottle = ThrottlePolicy{Free: 20, Base: 30 * time.Second, Max: time.Hour, Forget: time.Hour}
)

// lockFor is how long the failures-th failure in a row locks the key.
func (p ThrottlePolicy) lockFor(failures int) time.Duration {
	if failures < p.Free {
		return 0
	}
	d := p.Base
	for i := p.Free; i < failures && d < p.Max; i++ {
		d *= 2
	}
	return min(d, p.Max)
}

// attempt counts one attempt against l at now, before the password is
// checked: that way attempts made in parallel are counted as they start,
// not after argon2 has answered them all. It returns the new state, or
// locked when the key is locked and the attempt must not be made.
func (p ThrottlePolicy) attempt(l catalog.LoginThrottle, now time.Time) (next catalog.LoginThrottle, locked bool) {
	if now.Before(l.LockedUntil) {
		return l, true
	}
	quietSince := l.LastFailureAt
	if l.LockedUntil.After(quietSince) {
		quietSince = l.LockedUntil
	}
	if now.Sub(quietSince) >= p.Forget {
		l.Failures = 0
	}
	l.Failures++
	l.LastFailureAt = now
	if d := p.lockFor(l.Failures); d > 0 {
		l.LockedUntil = now.Add(d)
	}
	return l, false
}

// The throttle keys of a typed user name and of a remote address
// (package throttlekey).
var userThrottleKey, addressThrottleKey = throttlekey.User, throttlekey.Address
