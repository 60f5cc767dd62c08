package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// byteUnits are the units a size may be written in, by their lower-case
// spelling: SI (kB, MB, ...: powers of 1000) and IEC (KiB, MiB, ...:
// powers of 1024), as every document of coffer writes them. Longest
// first, so that "mib" is not read as "b".
var byteUnits = []struct {
	suffix string
	mult   float64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"tib", 1 << 40}, {"pib", 1 << 50},
	{"kb", 1e3}, {"mb", 1e6}, {"gb", 1e9}, {"tb", 1e12}, {"pb", 1e15},
	{"b", 1},
}

// ambiguousUnits are the bare prefixes some tools read as SI and others
// as IEC: refused, so that "16M" never means what its writer did not.
const ambiguousUnits = "kmgtp"

// ParseSize reads a byte count: a number ("1048576", "1.5") and a unit,
// SI ("500GB": 500×10⁹ bytes) or IEC ("64MiB": 64×2²⁰), in any case. A
// bare K, M, G, T or P is refused as ambiguous, as is a count that is not
// a whole number of bytes.
func ParseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := 1.0
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	if n := len(t); mult == 1 && n > 0 && strings.ContainsRune(ambiguousUnits, rune(t[n-1])) {
		num, prefix := strings.TrimSpace(t[:n-1]), strings.ToUpper(t[n-1:])
		return 0, fmt.Errorf("size %q is ambiguous: write %s%siB (powers of 1024) or %s%sB (powers of 1000)", s, num, prefix, num, prefix)
	}
	if n, err := strconv.ParseInt(t, 10, 64); err == nil && n >= 0 {
		if float64(n)*mult > math.MaxInt64/2 {
			return 0, fmt.Errorf("size %q is too large", s)
		}
		return n * int64(mult), nil
	}
	f, err := strconv.ParseFloat(t, 64)
	bytes := f * mult
	if err != nil || !(f >= 0) || bytes > math.MaxInt64/2 || bytes != math.Trunc(bytes) { // !(f >= 0) also refuses NaN
		return 0, fmt.Errorf("invalid size %q (like 64MiB, 500GB or 1048576)", s)
	}
	return int64(bytes), nil
}

// HumanBytes formats a byte count with binary units ("1.5 GiB").
func HumanBytes(n int64) string {
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
