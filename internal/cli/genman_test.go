package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/manpage"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestManPages runs `coffer generate man --dir DIR` as the packages do,
// and checks every page: one per command, each rendered by groff with
// every warning on and none printed, each holding its command's manual
// text (the one `coffer help` shows) word for word.
func TestManPages(t *testing.T) {
	groff := testutil.RequireBinary(t, "groff")
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	if code := Execute(context.Background(), []string{"generate", "man", "--dir", dir}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("generate man: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	written := strings.Fields(out.String())
	want := map[string]*cobra.Command{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		want[manpage.FileName(c)] = c
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				walk(sub)
			}
		}
	}
	walk(manualRoot())
	if len(written) != len(want)+1 {
		t.Errorf("wrote %d pages for %d commands and coffer.yaml.5", len(written), len(want))
	}
	for _, name := range written {
		page := filepath.Join(dir, name)
		cmd := exec.Command(groff, "-man", "-ww", "-z", page)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil || stderr.Len() > 0 {
			t.Errorf("groff -ww %s: %v\n%s", name, err, stderr.String())
		}
	}
	for name, c := range want {
		text := render(t, groff, filepath.Join(dir, name))
		first := strings.SplitN(c.Long, "\n\n", 2)[0]
		if c == c.Root() { // the root's manual starts with its NAME section
			first = "coffer backs up whole VMs"
		}
		if !strings.Contains(text, words(first)) {
			t.Errorf("%s does not hold its manual's first paragraph %q", name, first)
		}
		if !strings.Contains(text, words(c.Short)) {
			t.Errorf("%s does not hold its summary %q", name, c.Short)
		}
	}
	if _, err := exec.LookPath("man"); err == nil {
		// man-db runs groff its own way (preconv, its macros): no warning either.
		cmd := exec.Command("man", "--warnings", "-l", filepath.Join(dir, "coffer-restore.1"))
		cmd.Env = append(os.Environ(), "MANPAGER=cat", "MANWIDTH=80")
		res, err := cmd.CombinedOutput()
		if err != nil || strings.Contains(string(res), "warning") || !strings.Contains(string(res), "COFFER-RESTORE(1)") {
			t.Errorf("man --warnings -l coffer-restore.1: %v\n%s", err, res)
		}
	}
}

// TestConfigManPageListsExactlyTheConfigKeys: the settings coffer.yaml(5)
// describes are the keys `coffer config keys` lists, no more, no fewer.
func TestConfigManPageListsExactlyTheConfigKeys(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := Execute(context.Background(), []string{"config", "keys", "--json"}, strings.NewReader(""), &out, &errOut); code != 0 {
		t.Fatalf("config keys: exit %d\n%s", code, errOut.String())
	}
	var keys []api.ConfigKey
	if err := json.Unmarshal(out.Bytes(), &keys); err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, k := range keys {
		want = append(want, k.Key)
	}
	dir := t.TempDir()
	if _, err := GenerateMan(dir); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "coffer.yaml.5"))
	if err != nil {
		t.Fatal(err)
	}
	// Each setting is a tagged paragraph of SETTINGS: .TP, then its key in bold.
	settings := strings.SplitN(strings.SplitN(string(page), "\n.SH SETTINGS\n", 2)[1], "\n.SH ", 2)[0]
	var got []string
	for _, m := range regexp.MustCompile(`\.TP\n\\fB(.*)\\fR\n`).FindAllStringSubmatch(settings, -1) {
		got = append(got, strings.ReplaceAll(m[1], `\-`, "-"))
	}
	sort.Strings(want)
	sort.Strings(got)
	if strings.Join(got, " ") != strings.Join(want, " ") || len(got) < 20 {
		t.Errorf("coffer.yaml.5 lists %d settings:\n%v\nconfig keys lists %d:\n%v", len(got), got, len(want), want)
	}
	for _, k := range keys {
		if k.Environment != "" && !strings.Contains(settings, k.Environment) {
			t.Errorf("coffer.yaml.5 does not name %s's variable %s", k.Key, k.Environment)
		}
	}
}

// TestManPagesAreDeterministic: two generations give the same bytes (no
// date), so packages built twice are the same.
func TestManPagesAreDeterministic(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	for _, dir := range []string{a, b} {
		if _, err := GenerateMan(dir); err != nil {
			t.Fatal(err)
		}
	}
	names, err := filepath.Glob(filepath.Join(a, "*"))
	if err != nil || len(names) < 40 {
		t.Fatalf("%d pages: %v", len(names), err)
	}
	for _, p := range names {
		x, _ := os.ReadFile(p)
		y, err := os.ReadFile(filepath.Join(b, filepath.Base(p)))
		if err != nil || !bytes.Equal(x, y) {
			t.Errorf("%s differs between two generations (%v)", filepath.Base(p), err)
		}
	}
}

// render is a page as groff lays it out in plain text on one long line
// per paragraph, its words separated by single spaces.
func render(t *testing.T, groff, page string) string {
	t.Helper()
	out, err := exec.Command(groff, "-man", "-Tutf8", "-P-cbou", "-rLL=1000n", page).Output()
	if err != nil {
		t.Fatalf("groff %s: %v", page, err)
	}
	return words(string(out))
}

// words is text with the manual texts' `quotes` dropped, dashes as ASCII
// and every run of white space one space.
func words(s string) string {
	s = strings.NewReplacer("`", "", "\u2010", "-", "\u2212", "-").Replace(s)
	return strings.Join(strings.Fields(s), " ")
}
