package cli_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
)

// TestJSONListsAreNeverNull runs the --json listings on an empty
// repository and catalog: each prints [], and no document of the other
// commands run there holds a null.
func TestJSONListsAreNeverNull(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Vars["COFFER_STATE_DIR"] = t.TempDir()
	e.Must("init")
	for _, args := range [][]string{
		{"snapshots"},
		{"catalog", "points"},
		{"jobs"},
		{"locks"},
		{"instant", "list"},
		{"config", "list"},
	} {
		out := strings.TrimSpace(e.Must(append(args, "--json")...))
		if out != "[]" {
			t.Errorf("coffer %s --json on an empty repository prints %s, want []", strings.Join(args, " "), out)
		}
	}
	for _, args := range [][]string{
		{"stats"},
		{"verify"},
		{"gc", "--dry-run"},
		{"forget", "--keep-last", "1", "--dry-run"},
		{"key", "list"},
		{"config", "show"},
		{"config", "keys"},
		{"catalog", "rebuild"},
		{"policy", "check", "--offline"},
	} {
		out := e.Must(append(args, "--json")...)
		var v any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Errorf("coffer %s --json: %v\n%s", strings.Join(args, " "), err, out)
			continue
		}
		if strings.Contains(out, "null") {
			t.Errorf("coffer %s --json holds a null:\n%s", strings.Join(args, " "), out)
		}
	}
}
