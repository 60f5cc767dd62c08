package policy

import (
	"slices"
	"strings"
	"testing"
)

// A policy's workers (its affinity) are read as names, each named once.
func TestPolicyWorkers(t *testing.T) {
	const doc = `
connections: [{name: vc, kind: fake}]
policies:
  - {name: pinned, connection: vc, workers: [%s]}
`
	cfg, err := load(t, strings.Replace(doc, "%s", "proxy1, proxy2", 1))
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := cfg.Policy("pinned"); !slices.Equal(p.Workers, []string{"proxy1", "proxy2"}) {
		t.Fatalf("workers %q", p.Workers)
	}
	for _, bad := range []string{"proxy1, proxy1", `""`} {
		if _, err := load(t, strings.Replace(doc, "%s", bad, 1)); err == nil || !strings.Contains(err.Error(), "name each worker once") {
			t.Errorf("workers [%s]: %v", bad, err)
		}
	}
}
