package storagesnap

import (
	"reflect"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

func TestParseRanges(t *testing.T) {
	got, err := parseRanges("131072 65536\n\n0 4096\n  4096 4096  \n65536 65536\n")
	want := []hypervisor.Extent{{Offset: 0, Length: 8192}, {Offset: 65536, Length: 131072}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v %v, want %+v", got, err, want)
	}
	if got, err := parseRanges(""); err != nil || len(got) != 0 {
		t.Fatalf("nothing changed: %+v %v", got, err)
	}
	for _, bad := range []string{"1", "1 2 3", "x 5", "5 0", "-1 5", "9223372036854775807 2", "1 2\n0x10 5"} {
		if _, err := parseRanges(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// FuzzParseRanges: whatever a provider prints, the result is an error or
// sorted, disjoint, non-empty extents that do not overflow.
func FuzzParseRanges(f *testing.F) {
	f.Add("0 65536\n131072 65536\n")
	f.Add("5 5\n0 10\n")
	f.Add("9223372036854775806 1")
	f.Fuzz(func(t *testing.T, out string) {
		ext, err := parseRanges(out)
		if err != nil {
			if !strings.Contains(err.Error(), "changed printed") {
				t.Fatalf("unexplained error %v", err)
			}
			return
		}
		for i, e := range ext {
			if e.Length <= 0 || e.Offset < 0 || e.Offset+e.Length < e.Offset {
				t.Fatalf("bad extent %+v", e)
			}
			if i > 0 && ext[i-1].Offset+ext[i-1].Length >= e.Offset {
				t.Fatalf("extents overlap or touch: %+v", ext)
			}
		}
	})
}
