// Package clitest is what the command line's tests share: an Env (a
// repository, a catalog and the variables to reach them) that runs coffer
// in process (Run, Must, Expect) or as a child process it can kill, `coffer
// server` as a real process (ServerProc), and the guests and labs the tests
// back up (QEMU, libvirt, vCenter). Every package of commands tests them
// through the whole tree (internal/cli), as its external test package,
// whose TestMain is Main. For tests only.
package clitest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog/postgres"
	"github.com/coffer-backup/coffer/internal/cli"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/cli/complete"
	"github.com/coffer-backup/coffer/internal/procs"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/schedule"
	"github.com/coffer-backup/coffer/internal/service/servicetest"

	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/local"
	"github.com/coffer-backup/coffer/internal/store/storetest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// Main is a test package's TestMain: it lets tests re-run their binary as
// coffer itself, so that a backup can be killed with SIGKILL like a real
// process.
func Main(m *testing.M) {
	// The simulated fleet (kind: fake) exists in this test binary only,
	// and in the coffer processes it re-runs as.
	servicetest.RegisterFake()
	if os.Getenv("COFFER_TEST_AS_CLI") == "1" {
		procs.Init() // as cmd/coffer does
		servicetest.DoNotRecord()
		if at := os.Getenv("COFFER_TEST_CRASH_AT"); at != "" {
			n, _ := strconv.Atoi(strings.TrimSuffix(at, "+"))
			command.StoreHook = func(st store.Store) store.Store { return storetest.CrashAt(st, n, strings.HasSuffix(at, "+")) }
		}
		if gate := os.Getenv("COFFER_TEST_GATE_READS"); gate != "" {
			command.StoreHook = func(st store.Store) store.Store { return gatedReads{Store: st, gate: gate} }
		}
		// The server's schedules follow the test's clock file
		// (testutil.FileClock): read only in a test binary.
		if clock := os.Getenv("COFFER_TEST_CLOCK"); clock != "" {
			schedule.ServerClock = &testutil.FileClock{Path: clock}
		}
		// Shell completions wait as long as the test says (package
		// complete's tests of candidates, not of its bound).
		if d, err := time.ParseDuration(os.Getenv("COFFER_TEST_COMPLETION_TIMEOUT")); err == nil {
			complete.Timeout = d
		}
		// A build one catalog migration ahead (a rolling upgrade's test).
		postgres.NextReleaseForTests = os.Getenv("COFFER_TEST_NEXT_SCHEMA") == "1"
		// As cmd/coffer does: SIGTERM and Ctrl-C cancel the command.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// Env is a test repository and the environment to reach it.
type Env struct {
	T    *testing.T
	Dir  string
	Repo string
	Vars map[string]string
	// Host, when set, runs the env's child processes: a net lab's host
	// (testutil.NetHost: its namespace and host name), e.g. a worker on a
	// host of its own, or any other wrapper of the command; nil: this
	// machine's.
	Host interface {
		Command(name string, args ...string) *exec.Cmd
	}
}

// NewEnv is an Env in a new temporary directory: a repository not yet
// initialised, its password, an empty configuration and a catalog.
func NewEnv(t *testing.T) *Env {
	dir := t.TempDir()
	e := &Env{T: t, Dir: dir, Repo: filepath.Join(dir, "repo"), Vars: map[string]string{}}
	e.Vars["COFFER_REPO"] = e.Repo
	e.Vars["COFFER_PASSWORD"] = "correct horse"
	e.Vars["COFFER_CONFIG"] = filepath.Join(dir, "none.yaml")
	e.Vars["COFFER_CATALOG"] = filepath.Join(dir, "catalog.db") // backups record points there
	if err := os.WriteFile(e.Vars["COFFER_CONFIG"], nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

// Run executes coffer in-process with the env's variables.
func (e *Env) Run(args ...string) (int, string, string) {
	e.T.Helper()
	for k, v := range e.Vars {
		e.T.Setenv(k, v)
	}
	var out, errOut bytes.Buffer
	code := cli.Execute(context.Background(), args, strings.NewReader(""), &out, &errOut)
	// A command leaves no file of the repository or the catalog open: the
	// CLI and the server share the service, and a server would leak them
	// call by call.
	for _, v := range []string{"COFFER_REPO", "COFFER_CATALOG"} {
		if loc := e.Vars[v]; filepath.IsAbs(loc) {
			if held := testutil.OwnFilesUnder(loc); len(held) > 0 {
				e.T.Errorf("coffer %v left files open: %s", args, strings.Join(held, "; "))
			}
		}
	}
	return code, out.String(), errOut.String()
}

// Must runs coffer and fails the test unless it succeeds; it returns
// stdout.
func (e *Env) Must(args ...string) string {
	e.T.Helper()
	code, out, errOut := e.Run(args...)
	if code != 0 {
		e.T.Fatalf("coffer %v: exit %d\n%s%s", args, code, out, errOut)
	}
	return out
}

// Expect runs coffer and fails the test unless it exits with want; it
// returns stdout and stderr.
func (e *Env) Expect(want int, args ...string) string {
	e.T.Helper()
	code, out, errOut := e.Run(args...)
	if code != want {
		e.T.Fatalf("coffer %v: exit %d, want %d\n%s%s", args, code, want, out, errOut)
	}
	return out + errOut
}

// File writes content to a file named name in the environment's
// directory and returns its path.
func (e *Env) File(name, content string) string {
	e.T.Helper()
	p := filepath.Join(e.Dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		e.T.Fatal(err)
	}
	return p
}

// Image writes a sparse image with size bytes, dataMiB of it random.
func (e *Env) Image(name string, size int64, dataMiB int) string {
	p := filepath.Join(e.Dir, name)
	f, err := os.Create(p)
	if err != nil {
		e.T.Fatal(err)
	}
	defer func() { _ = f.Close() }() // its writes' errors are checked
	if err := f.Truncate(size); err != nil {
		e.T.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for i := range dataMiB {
		_, _ = rand.Read(buf)
		if _, err := f.WriteAt(buf, int64(i)*2<<20); err != nil {
			e.T.Fatal(err)
		}
	}
	return p
}

// SnapshotsJSON is `coffer snapshots --json`.
func SnapshotsJSON(t *testing.T, e *Env) []api.BackupPoint {
	var v []api.BackupPoint
	if err := json.Unmarshal([]byte(e.Must("snapshots", "--json")), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// DirSize is the bytes of the files under dir.
func DirSize(t *testing.T, dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			fi, _ := d.Info()
			n += fi.Size()
		}
		return nil
	})
	return n
}

// SameFile reports whether the files a and b hold the same bytes.
func SameFile(t *testing.T, a, b string) bool {
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(x, y)
}

// Manifest reads a backup point's manifest from the env's local
// repository, for tests that reach into its objects (the documents do not
// name the repository's internal objects).
func (e *Env) Manifest(pointID string) *repo.Point {
	e.T.Helper()
	ctx := context.Background()
	st, err := local.Open(e.Repo)
	if err != nil {
		e.T.Fatal(err)
	}
	r, err := repo.Open(ctx, st, []byte(e.Vars["COFFER_PASSWORD"]), repo.Options{})
	if err != nil {
		e.T.Fatal(err)
	}
	s, err := r.FindPoint(ctx, pointID)
	if err != nil {
		e.T.Fatal(err)
	}
	return s
}

// gatedReads holds every read of pack data until the gate file exists
// or the read's context ends: a verify that reads data is then running,
// deterministically, for as long as a test needs.
type gatedReads struct {
	store.Store
	gate string
}

func (g gatedReads) Read(ctx context.Context, name string, off, length int64) (io.ReadCloser, error) {
	if strings.HasPrefix(name, "data/") {
		for {
			if _, err := os.Stat(g.gate); err == nil {
				break
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(20 * time.Millisecond): // polls a file; no test timing depends on it
			}
		}
	}
	return g.Store.Read(ctx, name, off, length)
}

// JobOf returns the newest job of a kind, with its log.
func (e *Env) JobOf(kind string) api.Job {
	e.T.Helper()
	var jobs []api.Job
	if err := json.Unmarshal([]byte(e.Must("jobs", "--json", "--kind", kind)), &jobs); err != nil || len(jobs) == 0 {
		e.T.Fatalf("no %s job recorded (%v)", kind, err)
	}
	var j api.Job
	if err := json.Unmarshal([]byte(e.Must("job", "show", "--json", itoa(jobs[0].ID))), &j); err != nil {
		e.T.Fatal(err)
	}
	return j
}

// LogHas reports whether an event of the job's log holds text.
func LogHas(j api.Job, text string) bool {
	for _, ev := range j.Events {
		if strings.Contains(ev.Message, text) {
			return true
		}
	}
	return false
}

// Config writes the configuration file the env's commands read.
func (e *Env) Config(doc string) {
	e.T.Helper()
	if err := os.WriteFile(e.Vars["COFFER_CONFIG"], []byte(doc), 0o600); err != nil {
		e.T.Fatal(err)
	}
}

// VMsJSON is `coffer vms --json`'s list of VMs; it fails the test when an
// inventory failed.
func VMsJSON(t *testing.T, e *Env, args ...string) []api.VM {
	t.Helper()
	var inv api.Inventory
	out := e.Must(append([]string{"vms", "--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &inv); err != nil || len(inv.Errors) != 0 {
		t.Fatalf("vms --json: %v\n%s", err, out)
	}
	return inv.VMs
}

// Child starts this test binary as coffer in a separate process.
func (e *Env) Child(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	if e.Host != nil {
		cmd = e.Host.Command(os.Args[0], args...)
	}
	cmd.Env = append(os.Environ(), "COFFER_TEST_AS_CLI=1")
	for k, v := range e.Vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// KillAfter runs a child and SIGKILLs it after d (the random kill point);
// it reports whether the child finished before being killed.
func (e *Env) KillAfter(d time.Duration, args ...string) bool {
	e.T.Helper()
	cmd, done := e.startChild(args...)
	select {
	case err := <-done:
		if err != nil {
			e.T.Fatalf("coffer %v failed before the kill: %v", args, err)
		}
		return true
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
		return false
	}
}

// KillWhen runs a child and SIGKILLs it as soon as cond holds (checked
// every millisecond: a kill point named by what the child has done, not
// by a time that a loaded machine stretches); it reports whether the
// child finished before cond ever held.
func (e *Env) KillWhen(cond func() bool, args ...string) bool {
	e.T.Helper()
	cmd, done := e.startChild(args...)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				e.T.Fatalf("coffer %v failed before the kill: %v", args, err)
			}
			return true
		case <-tick.C:
			if cond() {
				_ = cmd.Process.Kill()
				<-done
				return false
			}
		}
	}
}

// startChild starts a child; done gets its Wait's error when it ends.
func (e *Env) startChild(args ...string) (*exec.Cmd, <-chan error) {
	e.T.Helper()
	cmd := e.Child(args...)
	if err := cmd.Start(); err != nil {
		e.T.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd, done
}

// Decode is a command's --json output as a T.
func Decode[T any](t *testing.T, out string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("output %q: %v", out, err)
	}
	return v
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
