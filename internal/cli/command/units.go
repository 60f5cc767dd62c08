package command

import (
	"time"

	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/policy"
)

// ParseSize is config.ParseSize: MB is 10⁶ bytes, MiB 2²⁰, a bare M refused.
func ParseSize(s string) (int64, error) { return config.ParseSize(s) }

// humanBytes formats a byte count with binary units.
func HumanBytes(n int64) string { return config.HumanBytes(n) }

// rate formats bytes per second.
func Rate(n int64, d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return HumanBytes(int64(float64(n)/d.Seconds())) + "/s"
}

// retainUntil turns --immutable-for into a time (zero when not set).
func RetainUntil(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	d, err := policy.ParseDuration(s)
	if err != nil || d <= 0 {
		return time.Time{}, Usagef("--immutable-for %q: want a positive duration such as 30d or 72h", s)
	}
	return policy.LockEnd(time.Now(), d), nil
}
