package policy

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/config"
	"go.yaml.in/yaml/v3"
)

// ByteRate is bytes per second, written as a size (config.ParseSize:
// "200MiB/s", "1.5GB/s", a plain number of bytes), "/s" optional.
type ByteRate int64

// ParseByteRate parses a rate.
func ParseByteRate(s string) (ByteRate, error) {
	t := strings.TrimSpace(s)
	if strings.HasSuffix(strings.ToLower(t), "/s") {
		t = t[:len(t)-2]
	}
	n, err := config.ParseSize(t)
	if err != nil {
		return 0, fmt.Errorf("%q is not a byte rate (like 200MiB/s): %w", s, err)
	}
	return ByteRate(n), nil
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (r *ByteRate) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseByteRate(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*r = v
	return nil
}

// MarshalYAML implements yaml.Marshaler: a rate written back (config get,
// config show, the console's Settings page) reads as the file wrote it,
// "400MiB/s", not as a bare count of bytes per second. The largest IEC
// unit that divides the rate exactly keeps the round trip lossless. No
// rate (0, unlimited) stays a plain 0, as a key the file left unset.
func (r ByteRate) MarshalYAML() (any, error) {
	if r == 0 {
		return 0, nil
	}
	for _, u := range []struct {
		name string
		size int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if int64(r)%u.size == 0 {
			return fmt.Sprintf("%d%s/s", int64(r)/u.size, u.name), nil
		}
	}
	return fmt.Sprintf("%d/s", int64(r)), nil
}

func (r ByteRate) String() string {
	if r == 0 {
		return "unlimited"
	}
	return fmt.Sprintf("%.1f MiB/s", float64(r)/(1<<20))
}

// Duration is a span written like a Go duration with days added: "30d",
// "1d12h", "72h".
type Duration time.Duration

// ParseDuration parses a Duration.
func ParseDuration(s string) (time.Duration, error) {
	if d, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(d)
		if err == nil && n >= 0 {
			return time.Duration(n) * 24 * time.Hour, nil
		}
	}
	if days, rest, ok := strings.Cut(s, "d"); ok {
		n, err1 := strconv.Atoi(days)
		r, err2 := time.ParseDuration(rest)
		if err1 == nil && err2 == nil && n >= 0 {
			return time.Duration(n)*24*time.Hour + r, nil
		}
	}
	return time.ParseDuration(s)
}

// String writes a Duration the way ParseDuration reads it: whole days as
// "30d", anything else as Go writes durations ("1d12h" reads back as 36h0m0s).
func (d Duration) String() string {
	v := time.Duration(d)
	if v > 0 && v%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(v/(24*time.Hour)), 10) + "d"
	}
	return v.String()
}

// MarshalYAML implements yaml.Marshaler, so a policy written back (the API,
// config show) reads again.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalText implements encoding.TextMarshaler (JSON documents).
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(strings.TrimSpace(string(b)))
	if err != nil || v < 0 {
		return fmt.Errorf("%q is not a duration (like 30d, 1d12h or 72h)", b)
	}
	*d = Duration(v)
	return nil
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := ParseDuration(strings.TrimSpace(n.Value))
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %q is not a duration (like 30d, 1d12h or 72h)", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}
