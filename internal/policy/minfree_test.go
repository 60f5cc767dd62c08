package policy

import "testing"

func TestMinFreeBytes(t *testing.T) {
	const total = 200 << 30
	for _, tc := range []struct {
		in   MinFree
		want uint64
	}{
		{"", 10 << 30}, // the default, 5%
		{"5%", 10 << 30},
		{"12.5%", 25 << 30},
		{"0", 0},
		{"0%", 0},
		{"20GiB", 20 << 30},
		{"1.5 GiB", 3 << 29},
	} {
		got, err := tc.in.Bytes(total)
		if err != nil || got != tc.want {
			t.Errorf("%q: %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []MinFree{"101%", "-1%", "lots", "20GiB/s", "x%"} {
		if _, err := bad.Bytes(total); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}
