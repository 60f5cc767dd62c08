package policy

import (
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestByteRateReadsBackAsWritten: a rate marshalled to YAML is written in
// the file's own form and parses back to the same rate.
func TestByteRateReadsBackAsWritten(t *testing.T) {
	for _, c := range []struct {
		rate ByteRate
		want string
	}{
		{400 << 20, "400MiB/s\n"},
		{3 << 30, "3GiB/s\n"},
		{1536 << 10, "1536KiB/s\n"},
		{200e6, "200000000/s\n"},
		{0, "0\n"},
	} {
		b, err := yaml.Marshal(c.rate)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("%d bytes/s is written %q, want %q", int64(c.rate), b, c.want)
		}
		var back ByteRate
		if err := yaml.Unmarshal(b, &back); err != nil || back != c.rate {
			t.Errorf("%q reads back as %d (%v), want %d", b, int64(back), err, int64(c.rate))
		}
	}
}
