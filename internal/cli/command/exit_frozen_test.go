package command

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
)

// exitCodeLines are this build's exit codes, one "class code" line per
// error class, plus the codes no class maps to.
func exitCodeLines() []string {
	var out []string
	for c, code := range ExitCodes {
		out = append(out, fmt.Sprintf("%s %d", c, code))
	}
	out = append(out, fmt.Sprintf("ok %d", ExitOK), fmt.Sprintf("failure %d", ExitFailure))
	sort.Strings(out)
	return out
}

// TestExitCodesKeepTheLastReleasesMeaning holds docs/compatibility.md's
// promise on exit codes: every error class the last release mapped to a
// code (release/<tag>/exit-codes.txt, frozen at the release) still maps
// to the same code. New classes may come; none may change or go.
// COFFER_UPDATE_RELEASE=1 writes this build's list there (the release
// step, docs/upgrading.md).
func TestExitCodesKeepTheLastReleasesMeaning(t *testing.T) {
	path := filepath.Join("..", "..", "..", "release", previousRelease(t), "exit-codes.txt")
	now := exitCodeLines()
	if os.Getenv("COFFER_UPDATE_RELEASE") != "" {
		if err := os.WriteFile(path, []byte(strings.Join(now, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the last release's exit codes: %v", err)
	}
	have := map[string]bool{}
	for _, l := range now {
		have[l] = true
	}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if !have[l] {
			t.Errorf("exit code %q of the last release is gone or changed: scripts depend on it (docs/compatibility.md)", l)
		}
	}
	if len(api.Classes) == 0 {
		t.Fatal("no error classes")
	}
}

// previousRelease is the tag release/previous names.
func previousRelease(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "release", "previous"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		t.Fatalf("release/previous holds %q, want \"<tag> <commit>\"", b)
	}
	return f[0]
}
