package plan

import (
	"strings"
	"testing"
)

func TestRulesOfTheSeeds(t *testing.T) {
	got := CheckRules(RuleInput{
		Pools: map[string]int{
			"datastore:lab/a": 8, "datastore:lab/b": 12, "datastore:lab/c": 0,
			"group:ctrl-a": 4, "group:ctrl-b": 6,
			"repo:main": 16, "repo:big": 16, "repo:open": 0,
		},
		Peaks:         map[string]int{"datastore:lab/c": 9, "repo:open": 3},
		TargetDevices: map[string]int{"repo:big": 4},
		// 64 ÷ 4 × 0.75 = 12 VMs at most.
		VMsPerDatastore: map[string]int{"datastore:lab/a": 13, "datastore:lab/b": 12},
		Volumes:         map[string]Volume{"datastore:lab/a": {64, 4}, "datastore:lab/b": {64, 4}},
	})
	var lines []string
	for _, v := range got {
		lines = append(lines, v.String())
	}
	want := []string{
		"VMs per volume: datastore:lab/a is 13 VMs, the rule is at most 12 (queue depth 64 ÷ 4 active commands per VM, less 25%)",
		"multiplexing: repo:main is 16 streams on 1 target device(s), 16.0:1, the rule is at most 4:1",
		"snapshots per datastore: datastore:lab/b is 12, the rule is at most 8",
		"snapshots per datastore: datastore:lab/c is unlimited (9 in the predicted run), the rule is at most 8",
		"streams per controller group: group:ctrl-b is 6, the rule is at most 4",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
