package metrics

import (
	"testing"

	"github.com/coffer-backup/coffer/internal/version"
)

// coffer_build_info is 1 and labelled with what `coffer version` says.
func TestBuildInfoNamesThisBinary(t *testing.T) {
	fams, err := New().Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := version.Get()
	for _, f := range fams {
		if f.GetName() != "coffer_build_info" {
			continue
		}
		m := f.GetMetric()
		if len(m) != 1 || m[0].GetGauge().GetValue() != 1 {
			t.Fatalf("coffer_build_info = %v, want one series at 1", m)
		}
		got := map[string]string{}
		for _, l := range m[0].GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		if got["version"] != want.Version || got["revision"] != want.Revision || got["goversion"] != want.GoVersion {
			t.Fatalf("labels %v, want %+v", got, want)
		}
		return
	}
	t.Fatal("coffer_build_info is not exposed")
}
