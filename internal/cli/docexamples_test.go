package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/config"
)

// The shell examples of the README and the guides (docs/01-... to
// docs/14-...; not the benchmark documents, not the generated
// docs/reference) are held true by TestDocumentedExamples.
//
// Every line of a fenced sh, bash, shell or console block that runs
// coffer names a command of the tree and only flags it knows, with the
// arguments it takes; a line that runs a script of scripts/ names an
// executable file. The lines are run too, each block in a temporary
// repository (initialised unless the block runs `coffer init`), catalog,
// state directory and configuration, and must exit 0. A block whose lines
// need what a test has not (a hypervisor, a network, root, a server) says
// so with a marker on the line before it, which the reader sees in the
// source only:
//
//	<!-- example: needs a QEMU guest -->                    checked, not run
//	<!-- example: runs init, snapshots; the others need a VM -->
//	                                                        the commands named run, the others are checked
//	<!-- example: skip: output, not commands -->            neither checked nor run
var exampleMarker = regexp.MustCompile(`^\s*<!--\s*example:\s*(.*?)\s*-->\s*$`)

// exampleDocs are the documents whose examples are checked.
func exampleDocs(t *testing.T, root string) []string {
	t.Helper()
	guides, err := filepath.Glob(filepath.Join(root, "docs", "[01][0-9]-*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md")}, guides...)
}

// example is one command of a documented shell line.
type example struct {
	file string // relative to the repository
	line int
	text string   // the line as documented
	args []string // after "coffer"; nil for a script
	env  []string // NAME=value the line sets for the command
	// script is the path of a script the line runs (scripts/...).
	script string
}

// exampleBlock is a fenced block's commands and its marker.
type exampleBlock struct {
	file, marker string
	line         int
	examples     []example
}

func TestDocumentedExamples(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []exampleBlock
	for _, path := range exampleDocs(t, root) {
		rel, _ := filepath.Rel(root, path)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		bs, err := shellBlocks(rel, string(data))
		if err != nil {
			t.Error(err)
		}
		blocks = append(blocks, bs...)
	}
	ran, checked, skipped := 0, 0, 0
	for _, b := range blocks {
		skip, runs, reason := parseMarker(b.marker)
		if skip {
			skipped += len(b.examples)
			continue
		}
		var runnable []example
		for _, ex := range b.examples {
			if ex.script != "" {
				checkScript(t, root, ex)
				checked++
				continue
			}
			path, ok := checkCommand(t, ex)
			switch {
			case !ok:
			case b.marker == "" || slices.Contains(runs, path):
				runnable = append(runnable, ex)
			default:
				checked++
			}
		}
		for _, name := range runs {
			if !slices.ContainsFunc(runnable, func(ex example) bool { p, _ := resolveCommand(ex.args); return p == name }) {
				t.Errorf("%s:%d: the marker says the block runs %q, but no line of it does (%s)", b.file, b.line, name, reason)
			}
		}
		if len(runnable) > 0 {
			ran += runExamples(t, b, runnable)
		}
	}
	t.Logf("documented shell examples: %d ran, %d checked only, %d skipped by marker", ran, checked, skipped)
	if ran == 0 {
		t.Error("no documented example ran")
	}
}

// parseMarker reads a block's marker: "skip: why", "runs a, b c; why"
// (the commands named run) or "why" (nothing runs).
func parseMarker(m string) (skip bool, runs []string, reason string) {
	if why, ok := strings.CutPrefix(m, "skip:"); ok {
		return true, nil, strings.TrimSpace(why)
	}
	if rest, ok := strings.CutPrefix(m, "runs "); ok {
		list, why, _ := strings.Cut(rest, ";")
		for _, c := range strings.Split(list, ",") {
			runs = append(runs, strings.TrimSpace(c))
		}
		return false, runs, strings.TrimSpace(why)
	}
	return false, nil, m
}

var fence = regexp.MustCompile("^\\s*(```+|~~~+)\\s*([A-Za-z]*)")

// shellBlocks finds the fenced shell blocks of a Markdown document and
// the commands of their lines.
func shellBlocks(file, doc string) ([]exampleBlock, error) {
	var out []exampleBlock
	var errs []error
	lines := strings.Split(doc, "\n")
	for i := 0; i < len(lines); i++ {
		m := fence.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		start, lang := i, m[2]
		for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), m[1]); i++ {
		}
		if !slices.Contains([]string{"sh", "bash", "shell", "console"}, lang) {
			continue
		}
		b := exampleBlock{file: file, line: start + 1, marker: markerBefore(lines, start)}
		for j := start + 1; j < i; j++ {
			text, first := lines[j], j
			for strings.HasSuffix(strings.TrimSpace(text), "\\") && j+1 < i {
				j++
				text = strings.TrimSuffix(strings.TrimSpace(text), "\\") + " " + lines[j]
			}
			exs, err := lineCommands(text)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s:%d: %w", file, first+1, err))
			}
			for _, ex := range exs {
				ex.file, ex.line, ex.text = file, first+1, strings.TrimSpace(lines[first])
				b.examples = append(b.examples, ex)
			}
		}
		out = append(out, b)
	}
	return out, errors.Join(errs...)
}

// markerBefore is the marker on the last non-blank line before line i.
func markerBefore(lines []string, i int) string {
	for j := i - 1; j >= 0; j-- {
		if strings.TrimSpace(lines[j]) == "" {
			continue
		}
		if m := exampleMarker.FindStringSubmatch(lines[j]); m != nil {
			return m[1]
		}
		return ""
	}
	return ""
}

// lineCommands splits a shell line into its commands (at ;, &&, || and
// |) and keeps those that run coffer or a script of scripts/.
func lineCommands(line string) ([]example, error) {
	line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "$ "))
	words, err := shellWords(line)
	if err != nil {
		return nil, err
	}
	var out []example
	var cmd []string
	flush := func() {
		if ex, ok := commandOf(cmd); ok {
			out = append(out, ex)
		}
		cmd = nil
	}
	for i := 0; i < len(words); i++ {
		switch w := words[i]; w {
		case ";", "&&", "||", "|":
			flush()
		case ">", ">>", "<", "2>":
			i++ // the redirection's file
		default:
			cmd = append(cmd, w)
		}
	}
	flush()
	return out, nil
}

var assignment = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)

// commandOf is a command's example when it runs coffer or a script.
func commandOf(words []string) (example, bool) {
	var ex example
	for len(words) > 0 && assignment.MatchString(words[0]) {
		ex.env, words = append(ex.env, words[0]), words[1:]
	}
	if len(words) > 0 && words[0] == "sudo" {
		words = words[1:]
	}
	switch {
	case len(words) == 0:
		return ex, false
	case words[0] == "coffer" || words[0] == "./coffer":
		ex.args = words[1:]
		if ex.args == nil {
			ex.args = []string{}
		}
		return ex, true
	case strings.HasPrefix(words[0], "scripts/") || strings.HasPrefix(words[0], "./scripts/"):
		ex.script = strings.TrimPrefix(words[0], "./")
		return ex, true
	}
	return ex, false
}

// shellWords splits a line as a POSIX shell would, well enough for
// documentation: quotes, backslashes, operators and a # comment.
func shellWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	end := func() {
		if inWord {
			words = append(words, cur.String())
		}
		cur.Reset()
		inWord = false
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'':
			j := strings.IndexByte(line[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("unterminated quote in %q", line)
			}
			cur.WriteString(line[i+1 : i+1+j])
			inWord, i = true, i+1+j
		case c == '"':
			j := strings.IndexByte(line[i+1:], '"')
			if j < 0 {
				return nil, fmt.Errorf("unterminated quote in %q", line)
			}
			cur.WriteString(line[i+1 : i+1+j])
			inWord, i = true, i+1+j
		case c == '\\' && i+1 < len(line):
			cur.WriteByte(line[i+1])
			inWord, i = true, i+1
		case c == '#' && !inWord:
			end()
			return words, nil
		case c == ' ' || c == '\t':
			end()
		case c == ';' || c == '|' || c == '&' || c == '>' || c == '<':
			end()
			op := string(c)
			if i+1 < len(line) && (line[i+1] == c) {
				op += string(c)
				i++
			}
			if op == "&" {
				continue // a background job: the command is the same
			}
			words = append(words, op)
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	end()
	return words, nil
}

// checkScript: the script a line runs exists and is executable.
func checkScript(t *testing.T, root string, ex example) {
	t.Helper()
	fi, err := os.Stat(filepath.Join(root, ex.script))
	switch {
	case err != nil:
		t.Errorf("%s:%d: %s: %v", ex.file, ex.line, ex.text, err)
	case fi.Mode()&0o111 == 0:
		t.Errorf("%s:%d: %s: %s is not executable", ex.file, ex.line, ex.text, ex.script)
	}
}

// checkCommand resolves a line's command in the tree, without running it,
// and parses its flags and arguments as cobra would; it returns the
// command's path below coffer ("backup vm").
func checkCommand(t *testing.T, ex example) (string, bool) {
	t.Helper()
	path, err := resolveCommand(ex.args)
	if err != nil {
		t.Errorf("%s:%d: %s: %v", ex.file, ex.line, ex.text, err)
		return "", false
	}
	return path, true
}

// resolveCommand finds the command that args name and parses its flags
// and arguments, naming the closest known command or flag for a typo.
func resolveCommand(args []string) (string, error) {
	root := newApp(&command.App{}).newRoot()
	root.InitDefaultHelpCmd() // as Execute does
	root.InitDefaultCompletionCmd()
	cmd, rest, err := root.Find(args)
	if err == nil {
		err = unknownSubcommand(cmd, rest)
	}
	if err == nil {
		if err = cmd.ParseFlags(rest); errors.Is(err, pflag.ErrHelp) {
			return strings.TrimPrefix(strings.TrimPrefix(cmd.CommandPath(), root.Name()), " "), nil
		} else if err != nil {
			err = flagError(cmd, err)
		}
	}
	if err == nil && !cmd.DisableFlagParsing {
		if help, _ := cmd.Flags().GetBool("help"); !help {
			err = cmd.ValidateArgs(cmd.Flags().Args())
		}
	}
	if err != nil {
		if msg, _, _ := strings.Cut(err.Error(), "\n"); strings.HasPrefix(msg, "unknown command") {
			err = fmt.Errorf("%s%s", msg, closest(firstWord(rest), commandNames(root))) // one line, not cobra's hint
		}
		return "", err
	}
	return strings.TrimPrefix(strings.TrimPrefix(cmd.CommandPath(), root.Name()), " "), nil
}

func firstWord(args []string) string {
	for _, a := range args {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}

// commandNames are the names and aliases of cmd's commands.
func commandNames(cmd *cobra.Command) []string {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() || c.Name() == "help" {
			names = append(names, append([]string{c.Name()}, c.Aliases...)...)
		}
	}
	return names
}

// unknownSubcommand: cobra's Find stops at the deepest command it knows;
// a first argument left that names none of a group's commands is a typo.
func unknownSubcommand(cmd *cobra.Command, rest []string) error {
	if !cmd.HasSubCommands() {
		return nil
	}
	first := ""
	for i := 0; i < len(rest); i++ {
		if !strings.HasPrefix(rest[i], "-") {
			first = rest[i]
			break
		}
		if f := flagNamed(cmd, rest[i]); f != nil && f.NoOptDefVal == "" && !strings.Contains(rest[i], "=") {
			i++ // its value
		}
	}
	if first == "" || (cmd.Runnable() && cmd.Args != nil && cmd.Args(cmd, []string{first}) == nil) {
		return nil
	}
	return fmt.Errorf("%q has no command %q%s", cmd.CommandPath(), first, closest(first, commandNames(cmd)))
}

func flagNamed(cmd *cobra.Command, arg string) *pflag.Flag {
	name := strings.TrimLeft(arg, "-")
	name, _, _ = strings.Cut(name, "=")
	if strings.HasPrefix(arg, "--") {
		return cmd.Flags().Lookup(name)
	}
	if len(name) == 1 {
		return cmd.Flags().ShorthandLookup(name)
	}
	return nil
}

var unknownFlag = regexp.MustCompile(`unknown (?:shorthand )?flag: '?-*([^' ]+)'?`)

// flagError names the closest flag the command knows for an unknown one.
func flagError(cmd *cobra.Command, err error) error {
	m := unknownFlag.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	return fmt.Errorf("%s: %w%s", cmd.CommandPath(), err, closest(m[1], names))
}

// closest proposes the known name nearest to a typo.
func closest(name string, known []string) string {
	best, bestD := "", len(name)/2+2
	for _, k := range known {
		if d := config.EditDistance(name, k); d < bestD {
			best, bestD = k, d
		}
	}
	if best == "" {
		return " (known: " + strings.Join(known, ", ") + ")"
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// pathOutside is an absolute or home path an example names, which
// running it could write: such an example is not run.
func pathOutside(ex example) string {
	for _, a := range append(slices.Clone(ex.args), ex.env...) {
		if _, v, ok := strings.Cut(a, "="); ok && !strings.HasPrefix(a, "/") {
			a = v
		}
		if strings.HasPrefix(a, "/") || strings.HasPrefix(a, "~") || strings.Contains(a, "://") {
			return a
		}
	}
	return ""
}

// exampleTimeout bounds one documented command's run.
const exampleTimeout = 10 * time.Second

// runExamples runs a block's runnable commands in order in a temporary
// repository, catalog, state directory and empty configuration, from a
// temporary working directory, and returns how many ran.
func runExamples(t *testing.T, b exampleBlock, exs []example) int {
	t.Helper()
	dir := t.TempDir()
	vars := map[string]string{
		"COFFER_REPO": filepath.Join(dir, "repo"), "COFFER_PASSWORD": "correct horse", "COFFER_CATALOG": filepath.Join(dir, "catalog.db"),
		"COFFER_STATE_DIR": filepath.Join(dir, "state"), "COFFER_CONFIG": filepath.Join(dir, "coffer.yaml"),
		"COFFER_CACHE_DIR": filepath.Join(dir, "cache"), "COFFER_PASSWORD_FILE": "", "COFFER_SERVER": "", "COFFER_TOKEN": "",
		"COFFER_TOKEN_FILE": "",
	}
	for k, v := range vars {
		t.Setenv(k, v)
	}
	if err := os.WriteFile(vars["COFFER_CONFIG"], nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	run := func(ex example, args ...string) {
		t.Helper()
		for _, kv := range ex.env {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
		var out, errOut bytes.Buffer
		// An example that waits (a server, a prompt) fails instead of
		// holding the test: mark it.
		ctx, cancel := context.WithTimeout(context.Background(), exampleTimeout)
		defer cancel()
		if code := Execute(ctx, args, strings.NewReader(""), &out, &errOut); code != 0 {
			t.Errorf("%s:%d: %s: exit %d\n%s%s", ex.file, ex.line, ex.text, code, out.String(), errOut.String())
		}
	}
	if !slices.ContainsFunc(exs, func(ex example) bool { return len(ex.args) > 0 && ex.args[0] == "init" }) {
		run(example{file: b.file, line: b.line, text: "(the block's repository)"}, "init")
	}
	for _, ex := range exs {
		if p := pathOutside(ex); p != "" {
			t.Errorf("%s:%d: %s: names %s, outside the test's directory: mark the block (<!-- example: why it cannot run -->)",
				ex.file, ex.line, ex.text, p)
			continue
		}
		run(ex, ex.args...)
	}
	return len(exs)
}

// TestDocumentedExamplesCatchTypos: the check names the closest command
// or flag for a typo, refuses a missing argument, and reads a line as a
// shell would.
func TestDocumentedExamplesCatchTypos(t *testing.T) {
	for line, want := range map[string]string{
		"coffer snapshotz":                                 `did you mean "snapshots"?`,
		"coffer backup vn --connection kvm2 web-1":         `did you mean "vm"?`,
		"coffer backup vm web.qmp --snapshot-mod quiesced": `did you mean "snapshot-mode"?`,
		"coffer forget --keep-dayly 7":                     `did you mean "keep-daily"?`,
		"coffer --state-dir /x worker --slot 2":            `did you mean "slots"?`,
		"coffer restore --to /tmp/x":                       "arg",
		"coffer forget --keep-daily 7 --json":              "",
		"coffer --state-dir /x worker --slots 2 --name a":  "",
		"coffer help backup vm":                            "",
		"coffer backup vm --help":                          "",
	} {
		exs, err := lineCommands(line)
		if err != nil || len(exs) != 1 {
			t.Fatalf("%s: %v %v", line, exs, err)
		}
		_, err = resolveCommand(exs[0].args)
		switch {
		case want == "" && err != nil:
			t.Errorf("%s: %v", line, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("%s: %v, want %q", line, err, want)
		}
	}
	exs, err := lineCommands(`COFFER_REPO=s3://b/x coffer init; coffer files get latest '/etc/a b' --tar - | tar -x  # comment`)
	if err != nil || len(exs) != 2 || exs[0].env[0] != "COFFER_REPO=s3://b/x" || !slices.Equal(exs[1].args, []string{"files", "get", "latest", "/etc/a b", "--tar", "-"}) {
		t.Fatalf("%+v %v", exs, err)
	}
}
