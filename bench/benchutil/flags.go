package benchutil

import (
	"strconv"
	"strings"
)

// Ints reads a comma-separated list of positive numbers (a flag such as
// -concurrency 8,32,256); a bad one ends the benchmark.
func Ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if strings.TrimSpace(f) == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			Fatalf("bad number %q", f)
		}
		out = append(out, n)
	}
	return out
}

// Size reads a byte count with an optional KiB, MiB or GiB suffix; a bad
// one ends the benchmark.
func Size(s string) int64 {
	mult := int64(1)
	for suf, m := range map[string]int64{"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30} {
		if strings.HasSuffix(s, suf) {
			s, mult = strings.TrimSuffix(s, suf), m
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		Fatalf("bad size %q", s)
	}
	return n * mult
}
