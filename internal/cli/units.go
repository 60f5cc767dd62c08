package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/policy"
)

// parseSize accepts "1048576", "1MiB", "4M", "16MB" (M and MB are MiB here:
// chunk and pack sizes are binary).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(strings.ToUpper(s))
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"TIB", 1 << 40}, {"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10}, {"TB", 1 << 40}, {"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"T", 1 << 40}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.m
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("invalid size %q", s)
	}
	return n * mult, nil
}

// humanBytes formats a byte count with binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// rate formats bytes per second.
func rate(n int64, d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return humanBytes(int64(float64(n)/d.Seconds())) + "/s"
}

// retainUntil turns --immutable-for into a time (zero when not set).
func retainUntil(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	d, err := policy.ParseDuration(s)
	if err != nil || d <= 0 {
		return time.Time{}, usagef("--immutable-for %q: want a positive duration such as 30d or 72h", s)
	}
	return policy.LockEnd(time.Now(), d), nil
}
