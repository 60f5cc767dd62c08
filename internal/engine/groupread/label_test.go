package groupread

import (
	"regexp"
	"testing"
)

// A storage snapshot label names a directory or an array object: a QEMU
// datastore (a path) must come out as one safe name.
func TestLabelPart(t *testing.T) {
	safe := regexp.MustCompile(`^[A-Za-z0-9._-]{1,60}$`)
	for ds, want := range map[string]string{
		"ds-001":                        "ds-001",
		"/srv/vms":                      "srv_vms",
		"[ssd 1] vm/x":                  "_ssd_1__vm_x",
		"/":                             "root",
		"/" + string(make([]byte, 100)): "____________________________________________________________",
	} {
		got := LabelPart(ds)
		if got != want || !safe.MatchString(got) {
			t.Errorf("LabelPart(%q) = %q, want %q", ds, got, want)
		}
	}
}
