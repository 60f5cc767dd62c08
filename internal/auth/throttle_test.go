package auth

import (
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

func TestThrottleBackoff(t *testing.T) {
	p := ThrottlePolicy{Free: 3, Base: 10 * time.Second, Max: time.Minute, Forget: time.Hour}
	want := []time.Duration{0, 0, 10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute}
	for i, w := range want {
		if got := p.lockFor(i + 1); got != w {
			t.Errorf("lock after failure %d = %s, want %s", i+1, got, w)
		}
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var l catalog.LoginThrottle
	for i := 1; i <= 3; i++ {
		var locked bool
		if l, locked = p.attempt(l, now); locked || l.Failures != i {
			t.Fatalf("attempt %d: locked %v, %d failures", i, locked, l.Failures)
		}
	}
	if !l.LockedUntil.Equal(now.Add(10 * time.Second)) {
		t.Fatalf("locked until %s after the third failure", l.LockedUntil)
	}
	// Locked: the attempt is refused and not counted.
	if next, locked := p.attempt(l, now.Add(9*time.Second)); !locked || next != l {
		t.Fatalf("attempt while locked: %v, %+v", locked, next)
	}
	// After the lock: counted, and locked twice as long.
	l, _ = p.attempt(l, now.Add(10*time.Second))
	if l.Failures != 4 || !l.LockedUntil.Equal(now.Add(30*time.Second)) {
		t.Fatalf("after the lock: %+v", l)
	}
	// Quiet for Forget after the lock ended: starts again.
	l, _ = p.attempt(l, now.Add(30*time.Second+time.Hour))
	if l.Failures != 1 {
		t.Fatalf("after a quiet hour: %+v", l)
	}
}

func TestThrottleKeys(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.7:5123":             "addr:192.0.2.7",
		"192.0.2.7":                  "addr:192.0.2.7",
		"[::ffff:192.0.2.7]:443":     "addr:192.0.2.7",
		"[2001:db8:1:2:3:4:5:6]:443": "addr:2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::1":       "addr:2001:db8:1:2::/64",
		"[fe80::1%eth0]:22":          "addr:fe80::/64",
		"unix-socket":                "addr:unix-socket",
	} {
		if got := addressThrottleKey(in); got != want {
			t.Errorf("addressThrottleKey(%q) = %q, want %q", in, got, want)
		}
	}
	if k := userThrottleKey("alice"); k == "user:alice" || len(k) != len("user:")+32 {
		t.Errorf("user key %q keeps the typed name", k)
	}
	if userThrottleKey("alice") == userThrottleKey("bob") {
		t.Error("two names share a key")
	}
}
