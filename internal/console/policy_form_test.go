package console

import (
	"encoding/json"
	"net/url"
	"testing"
)

// TestPolicyFormKeepsWhatItDoesNotShow: the editor's form is laid over
// the stored policy: what the form shows is replaced (emptied fields
// removed), what it does not show (timeouts, tags, select's tags,
// retention's other rules) is kept, and a keep rule that is not a number
// goes to the API as typed, for the API to say what is wrong.
func TestPolicyFormKeepsWhatItDoesNotShow(t *testing.T) {
	var base map[string]any
	stored := `{"name": "web", "connections": ["a", "b"], "repository": "main", "schedule": "@daily",
		"select": {"names": ["web-*"], "tags": {"env": "prod"}}, "exclude": {"names": ["web-test"]},
		"retention": {"keep-daily": 7, "keep-within": "2d"}, "timeouts": {"vm": "4h"}, "tags": {"team": "ops"}}`
	if err := json.Unmarshal([]byte(stored), &base); err != nil {
		t.Fatal(err)
	}
	form := url.Values{"name": {"web"}, "connection": {"lab"}, "repository": {""}, "schedule": {"0 22 * * *"},
		"select": {"web-* db-01"}, "exclude": {""}, "keep-daily": {"14"}, "keep-last": {"lots"}, "rpo": {"26h"}}
	got, _ := json.Marshal(specOf(base, form))
	want := `{"connection":"lab","name":"web","retention":{"keep-daily":14,"keep-last":"lots","keep-within":"2d"},"rpo":"26h",` +
		`"schedule":"0 22 * * *","select":{"names":["web-*","db-01"],"tags":{"env":"prod"}},"tags":{"team":"ops"},"timeouts":{"vm":"4h"}}`
	if string(got) != want {
		t.Errorf("spec\n%s\nwant\n%s", got, want)
	}
	// The stored policy is left as it was (the form works on a copy).
	if sel := base["select"].(map[string]any)["names"].([]any); len(sel) != 1 {
		t.Errorf("the stored policy changed: %v", base["select"])
	}
	// A new policy: only what was typed.
	got, _ = json.Marshal(specOf(nil, url.Values{"name": {"n"}, "connection": {"c"}, "mode": {"incremental"}}))
	if string(got) != `{"connection":"c","mode":"incremental","name":"n"}` {
		t.Errorf("a new policy: %s", got)
	}
}
