package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
)

// TestEveryCommandHasAManualPage walks every command, groups included,
// and fails when `coffer help COMMAND` would show a one-line help instead
// of a manual page: a description, what it prints, examples, exit status.
// (cobra's own help and completion commands are not coffer's.)
func TestEveryCommandHasAManualPage(t *testing.T) {
	a := &app{}
	root := a.newRoot()
	n := 0
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		n++
		name := c.CommandPath()
		long := c.Long
		switch {
		case strings.TrimSpace(long) == "":
			t.Errorf("%s has no manual page (Long is empty)", name)
		case !strings.Contains(long, "\nEXAMPLES\n"):
			t.Errorf("%s: its manual page has no EXAMPLES section", name)
		case !strings.Contains(long, "\nEXIT STATUS\n"):
			t.Errorf("%s: its manual page has no EXIT STATUS section", name)
		case c.Runnable() && !strings.Contains(long, "\nOUTPUT\n"):
			t.Errorf("%s: its manual page does not say what it prints (OUTPUT)", name)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if n < 40 {
		t.Fatalf("walked only %d commands", n)
	}
}

// TestEveryClassHasAnExitCode: an error class without an exit code would
// end as a plain failure, whatever docs/11-troubleshooting.md promises.
func TestEveryClassHasAnExitCode(t *testing.T) {
	for _, c := range api.Classes {
		if _, ok := exitCodes[c]; !ok {
			t.Errorf("class %s has no exit code", c)
		}
	}
	if len(exitCodes) != len(api.Classes) {
		t.Errorf("%d exit codes for %d classes", len(exitCodes), len(api.Classes))
	}
}

// TestJSONListsAreNeverNull runs the --json listings on an empty
// repository and catalog: each prints [], and no document of the other
// commands run there holds a null.
func TestJSONListsAreNeverNull(t *testing.T) {
	e := newEnv(t)
	e.vars["COFFER_STATE_DIR"] = t.TempDir()
	e.must("init")
	for _, args := range [][]string{
		{"snapshots"},
		{"catalog", "points"},
		{"jobs"},
		{"locks"},
		{"instant", "list"},
		{"config", "list"},
	} {
		out := strings.TrimSpace(e.must(append(args, "--json")...))
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
		out := e.must(append(args, "--json")...)
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
