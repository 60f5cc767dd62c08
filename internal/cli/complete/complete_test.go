package complete_test

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/complete"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// patient is how long the completions of the tests of candidates wait.
const patient = time.Minute

// completionFixture is a repository with one backup point (and so one
// job) in the catalog, and a configuration with a connection, a policy
// and a named repository.
//
// Its completions (in this process, and in the coffer processes the env
// starts) wait for their candidates as long as needed: these tests check
// the candidates; TestCompletionThroughTheServer's last part, the bound.
func completionFixture(t *testing.T) (*clitest.Env, api.BackupPoint, api.Job) {
	saved := complete.Timeout
	complete.Timeout = patient
	t.Cleanup(func() { complete.Timeout = saved })
	e := clitest.NewEnv(t)
	e.Vars["COFFER_TEST_COMPLETION_TIMEOUT"] = patient.String()
	e.Vars["COFFER_STATE_DIR"] = filepath.Join(e.Dir, "state")
	e.Must("init")
	e.Config(`
connections:
  - {name: lab, kind: fake, options: {seed: 3, vms: 2, hosts: 1, datastores: 1, disk-size: 128KiB}}
policies:
  - {name: nightly, connection: lab}
repositories:
  - {name: offsite, location: ` + filepath.Join(e.Dir, "offsite") + `}
`)
	e.Must("backup", "disk", e.Image("web.img", 4<<20, 1), "--name", "web-1")
	points := clitest.SnapshotsJSON(t, e)
	if len(points) != 1 {
		t.Fatalf("%d points", len(points))
	}
	return e, points[0], e.JobOf("backup-disk")
}

// candidates runs `coffer __complete ARGS...` (what the shells' scripts
// run) and returns the candidates' values and the directive line.
func candidates(t *testing.T, run func(args ...string) (int, string, string), args ...string) ([]string, string) {
	t.Helper()
	code, out, errOut := run(append([]string{"__complete"}, args...)...)
	if code != 0 {
		t.Fatalf("coffer __complete %q: exit %d\n%s%s", args, code, out, errOut)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var values []string
	for _, l := range lines[:len(lines)-1] {
		values = append(values, strings.SplitN(l, "\t", 2)[0])
	}
	return values, lines[len(lines)-1]
}

// kinds are the completions every test checks, for a fixture's point and
// job: the command line, and the values it must offer.
func kinds(point api.BackupPoint, job api.Job) []struct {
	args []string
	want []string
} {
	id := func(j api.Job) string { b, _ := json.Marshal(j.ID); return string(b) }
	return []struct {
		args []string
		want []string
	}{
		{[]string{"restore", "vm", ""}, []string{point.ShortID}},
		{[]string{"protect", point.ShortID[:3]}, []string{point.ShortID}},
		{[]string{"files", "ls", ""}, []string{point.ShortID}},
		{[]string{"instant", "start", ""}, []string{point.ShortID}},
		{[]string{"run", ""}, []string{"nightly"}},
		{[]string{"jobs", "--policy", "n"}, []string{"nightly"}},
		{[]string{"backup", "vm", "--connection", ""}, []string{"lab"}},
		{[]string{"vms", "refresh", ""}, []string{"lab"}},
		{[]string{"copy", "--to", ""}, []string{"default", "offsite"}},
		{[]string{"snapshots", "--server-repository", "off"}, []string{"offsite"}},
		{[]string{"job", "show", ""}, []string{id(job)}},
	}
}

// TestCompletionHere: without a server, the completions list the points
// of the catalog, the configuration's policies, connections and
// repositories, and the catalog's jobs, and never offer files instead.
func TestCompletionHere(t *testing.T) {
	e, point, job := completionFixture(t)
	for _, k := range kinds(point, job) {
		got, directive := candidates(t, e.Run, k.args...)
		if !slices.Equal(got, k.want) || directive != ":4" {
			t.Errorf("coffer %q<TAB> offers %q (%s), want %q (:4, no files)", k.args, got, directive, k.want)
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		if script := e.Must("completion", shell); !strings.Contains(script, "__complete") {
			t.Errorf("coffer completion %s does not ask coffer for its candidates:\n%s", shell, script)
		}
	}
	// A location flag offers files when no repository's name matches.
	if got, directive := candidates(t, e.Run, "copy", "--to", "/mnt/"); len(got) != 0 || directive != ":0" {
		t.Errorf("copy --to /mnt/<TAB> offers %q (%s), want files (:0)", got, directive)
	}
}

// TestCompletionThroughTheServer: with COFFER_SERVER set, the completions
// come from the server's API (a policy created through it, which this
// side's configuration file does not have), also for a command that runs
// on this host only (`instant start`); a server that is down or never
// answers gives no candidates, and the completion ends.
func TestCompletionThroughTheServer(t *testing.T) {
	e, point, job := completionFixture(t)
	s := e.StartServer()
	token := e.AdminToken()
	draft := filepath.Join(e.Dir, "api-policy.yaml")
	if err := os.WriteFile(draft, []byte("name: weekly\nconnection: lab\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := e.Remote(s, token, "config", "create", "policy", "-f", draft); code != 0 {
		t.Fatalf("config create policy through the server: exit %d\n%s%s", code, out, errOut)
	}
	// The operator's laptop has no configuration file, repository or catalog.
	file := e.Vars["COFFER_CONFIG"]
	e.Vars["COFFER_CONFIG"] = filepath.Join(e.Dir, "none.yaml")
	if err := os.WriteFile(e.Vars["COFFER_CONFIG"], nil, 0o600); err != nil {
		t.Fatal(err)
	}
	defer func() { e.Vars["COFFER_CONFIG"] = file }()
	remote := func(args ...string) (int, string, string) { return e.Remote(s, token, args...) }
	if code, out, errOut := remote("completion", "bash"); code != 0 || !strings.Contains(out, "__start_coffer") {
		t.Errorf("coffer completion bash with COFFER_SERVER set: exit %d\n%s", code, errOut)
	}
	for _, k := range kinds(point, job) {
		want := k.want
		if k.args[0] == "run" {
			want = []string{"nightly", "weekly"}
		}
		got, directive := candidates(t, remote, k.args...)
		if !slices.Equal(got, want) || directive != ":4" {
			t.Errorf("through the server, coffer %q<TAB> offers %q (%s), want %q", k.args, got, directive, want)
		}
	}
	unanswered(t, e, token)
}

// unanswered: a completion through a server that is down, then one that
// accepts and never answers, offers nothing, and ends.
func unanswered(t *testing.T, e *clitest.Env, token string) {
	down, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "http://" + down.Addr().String()
	_ = down.Close()
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = silent.Close() }()
	var accepted atomic.Int64
	go func() {
		var held []net.Conn // never answered, closed with the listener's test
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			held = append(held, c)
		}
	}()
	for _, url := range []string{downURL, "http://" + silent.Addr().String()} {
		cmd := e.Child("__complete", "run", "")
		// The product's own bound, not the fixture's patience.
		cmd.Env = append(cmd.Env, "COFFER_SERVER="+url, "COFFER_TOKEN="+token, "COFFER_TEST_COMPLETION_TIMEOUT=")
		start := time.Now()
		timer := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() }) // a hang fails below, not the suite
		out, err := cmd.Output()
		timer.Stop()
		took := time.Since(start)
		t.Logf("a completion against %s (a server %s) ended after %v, the process's start included", url,
			map[bool]string{true: "that is down", false: "that never answers"}[url == downURL], took.Round(time.Millisecond))
		if err != nil || strings.TrimSpace(string(out)) != ":4" {
			t.Errorf("coffer __complete run <TAB> against %s: %v\n%s", url, err, out)
		}
	}
	// In this process, without a process's start: the bound alone.
	complete.Timeout = complete.DefaultTimeout
	e.Vars["COFFER_SERVER"], e.Vars["COFFER_TOKEN"] = "http://"+silent.Addr().String(), token
	start := time.Now()
	got, directive := candidates(t, e.Run, "run", "")
	t.Logf("in process, a completion against the server that never answers ended after %v (its bound: %v)",
		time.Since(start).Round(time.Millisecond), complete.DefaultTimeout)
	delete(e.Vars, "COFFER_SERVER")
	delete(e.Vars, "COFFER_TOKEN")
	if len(got) != 0 || directive != ":4" {
		t.Errorf("in process, against the server that never answers: %q (%s)", got, directive)
	}
	if accepted.Load() == 0 {
		t.Error("the completion never reached the server that does not answer")
	}
}

// TestShellsComplete installs the scripts of `coffer completion` where
// its manual pages say, in a new home directory, and lets the real shells
// load them: bash (with bash-completion) and fish complete `coffer run n`
// with the policy, zsh's compinit registers the script's function.
func TestShellsComplete(t *testing.T) {
	const lib = "/usr/share/bash-completion/bash_completion"
	if _, err := os.Stat(lib); err != nil {
		if testutil.Strict() {
			t.Fatalf("bash-completion is required in CI (scripts/ci/install-manpages.sh): %v", err)
		}
		t.Skipf("bash-completion not installed: %v", err)
	}
	bash, fish, zsh := testutil.RequireBinary(t, "bash"), testutil.RequireBinary(t, "fish"), testutil.RequireBinary(t, "zsh")
	e, _, _ := completionFixture(t)
	home, bin := filepath.Join(e.Dir, "home"), filepath.Join(e.Dir, "bin")
	install := func(shell, path string) {
		path = filepath.Join(home, path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(e.Must("completion", shell)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	install("bash", ".local/share/bash-completion/completions/coffer")
	install("fish", ".config/fish/completions/coffer.fish")
	install("zsh", "zsh-functions/_coffer")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(os.Args[0], filepath.Join(bin, "coffer")); err != nil { // this test binary runs as coffer
		t.Fatal(err)
	}
	shell := func(args ...string) string {
		t.Helper()
		cmd := e.Child() // its environment: coffer's settings, and COFFER_TEST_AS_CLI
		cmd.Path, cmd.Args, cmd.Dir = args[0], args, home
		cmd.Env = append(cmd.Env, "PATH="+bin+":"+os.Getenv("PATH"), "HOME="+home, "XDG_DATA_HOME=", "XDG_CONFIG_HOME=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s", args[0], err, out)
		}
		t.Logf("%s:\n%s", filepath.Base(args[0]), out)
		return string(out)
	}
	// bash-completion loads a command's script at its first completion
	// (_completion_loader), then bash runs the function it registered.
	out := shell(bash, "--norc", "--noprofile", "-c", `
source `+lib+`
_completion_loader coffer
complete -p coffer
COMP_LINE="coffer run n"; COMP_POINT=${#COMP_LINE}; COMP_WORDS=(coffer run n); COMP_CWORD=2
__start_coffer coffer n run 2>/dev/null
printf 'candidate: %s\n' "${COMPREPLY[@]}"`)
	if !strings.Contains(out, "complete -o default -F __start_coffer coffer") || !strings.Contains(out, "candidate: nightly\n") {
		t.Errorf("bash did not complete coffer run n<TAB> with nightly")
	}
	if out := shell(fish, "-c", `complete -C "coffer run n"`); !strings.HasPrefix(out, "nightly\t") {
		t.Errorf("fish did not complete coffer run n<TAB> with nightly")
	}
	if out := shell(zsh, "-f", "-c", `fpath=(~/zsh-functions $fpath); autoload -U compinit; compinit -u -d ~/.zcompdump; print -r -- "${_comps[coffer]}"`); strings.TrimSpace(out) != "_coffer" {
		t.Errorf("zsh's compinit did not register _coffer for coffer")
	}
}
