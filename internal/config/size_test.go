package config

import (
	"strings"
	"testing"
)

// TestParseSizeOneRule: MB and the other SI units are powers of 1000,
// MiB and the other IEC units powers of 1024, in any case; a bare prefix
// is refused as ambiguous, naming both spellings.
func TestParseSizeOneRule(t *testing.T) {
	for in, want := range map[string]int64{
		"1048576": 1 << 20, "16MB": 16e6, "16MiB": 16 << 20, "16 mib": 16 << 20, "500GB": 500e9, "1.5KiB": 1536,
		"2TiB": 2 << 40, "1kB": 1000, "1KB": 1000, "7B": 7, "0": 0, "1PiB": 1 << 50,
	} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("%q = %d, %v; want %d", in, got, err, want)
		}
	}
	for in, why := range map[string]string{
		"16M": "write 16MiB (powers of 1024) or 16MB", "4k": "ambiguous", "1 G": "write 1GiB", "": "invalid",
		"-1MB": "invalid", "1.5B": "invalid", "NaN": "invalid", "9999999PB": "too large", "99999999999999PiB": "too large", "MiB": "invalid",
	} {
		if _, err := ParseSize(in); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v, want an error saying %q", in, err, why)
		}
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"64MiB", "500GB", "1.5KiB", "16M", "NaN", "1e30"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, err := ParseSize(s); err == nil && n < 0 {
			t.Fatalf("%q parsed to negative %d", s, n)
		}
	})
}
