package manpage

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestTextSurvivesRoff: what a manual text may hold reaches the reader
// as written (a line starting with a dot or a quote, backslashes,
// characters outside ASCII, a table's columns), and groff warns about
// none of it.
func TestTextSurvivesRoff(t *testing.T) {
	groff := testutil.RequireBinary(t, "groff")
	cmd := &cobra.Command{Use: "tool", Short: "a tool \u2264 5 s", Long: `.TH is not a request here,
'neither is this, and C:\dir\file keeps its backslashes; ` + "`coffer x`" + ` is bold.

OUTPUT
    ID    TIME
    a1    now

EXAMPLES
    tool --flag | jq '.[0]'

EXIT STATUS
    0.`, Run: func(*cobra.Command, []string) {}}
	cmd.Flags().String("flag", "x", "a `NAME` to use")
	page := filepath.Join(t.TempDir(), FileName(cmd))
	if err := os.WriteFile(page, Manual{Source: "coffer test"}.Page(cmd), 0o644); err != nil {
		t.Fatal(err)
	}
	run := exec.Command(groff, "-man", "-ww", "-Tutf8", "-P-cbou", page)
	var stderr bytes.Buffer
	run.Stderr = &stderr
	out, err := run.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("groff: %v\n%s", err, stderr.String())
	}
	text := strings.ReplaceAll(string(out), "\u2010", "-")
	for _, want := range []string{".TH is not a request here,", "'neither is this", `C:\dir\file`, "coffer x is bold",
		"ID    TIME", "a1    now", "tool --flag | jq '.[0]'", "tool - a tool \u2264 5 s", "--flag NAME", "a NAME to use (default: x)",
		"EXIT STATUS", "OPTIONS"} {
		if !strings.Contains(text, want) {
			t.Errorf("the page lacks %q:\n%s", want, text)
		}
	}
}
