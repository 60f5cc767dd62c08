package servercmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// hookConfig is the notifications section that tells h of every job's end.
func hookConfig(url string) string {
	return fmt.Sprintf(`
notifications:
  targets: [{name: hook, webhook: {url: %q}}]
  matchers: [{name: every-end, targets: [hook], types: [task-succeeded, task-failed]}]
`, url)
}

// startLife starts a server on a test clock at start, with config (the
// hook's notifications added), and opens the catalog; it returns the
// administrator's token too (made before the catalog is open here: a
// command run in this process must leave none of its files open).
func startLife(t *testing.T, e *clitest.Env, config string, start time.Time) (*lifeEnv, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // only catches a hang
	t.Cleanup(cancel)
	h := &hooks{}
	hook := httptest.NewServer(h)
	t.Cleanup(hook.Close)
	e.Config(config + hookConfig(hook.URL))
	clock := testutil.NewFileClock(t, e.Dir, start)
	e.Vars["COFFER_TEST_CLOCK"] = clock.Path
	server := e.StartServer()
	tok := e.AdminToken()
	cat, err := catalogopen.Open(ctx, e.Vars["COFFER_CATALOG"])
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cat.Close() })
	return &lifeEnv{t: t, ctx: ctx, e: e, clock: clock, cat: cat, hooks: h, server: server}, tok
}

// jobsOf lists the jobs of a kind, oldest first.
func (l *lifeEnv) jobsOf(kind string) []catalog.Job {
	l.t.Helper()
	jobs, err := l.cat.ListJobs(l.ctx, catalog.JobFilter{Kind: kind})
	if err != nil {
		l.t.Fatal(err)
	}
	slices.Reverse(jobs)
	return jobs
}

// logged returns the first line of kind in job id's log.
func (l *lifeEnv) logged(id int64, kind string) (catalog.Event, bool) {
	l.t.Helper()
	events, err := l.cat.JobLog(l.ctx, id, 0, 0)
	if err != nil {
		l.t.Fatal(err)
	}
	for _, ev := range events {
		if ev.Kind == kind {
			return ev, true
		}
	}
	return catalog.Event{}, false
}

// TestCopyAfterABackupSurvivesARestart runs `coffer server` with a copy
// that follows policy nightly (copy: [{to: offsite, after: nightly}])
// on a clock the test holds still, so the server looks for ended runs
// only when it starts. A run of the policy through the API ends with
// its copy pending, recorded in its log; the server stops before the
// copy starts, and the server started again copies exactly the run's
// points, as a job of its own whose log and the run's name each other.
// Then a maintenance schedule created through the API (gc of offsite)
// is taken by the running scheduler without a restart, claimed and run
// at its slot; `config show` names the file and the catalog as the
// sources, and the file's repository cannot be scheduled through the API.
func TestCopyAfterABackupSurvivesARestart(t *testing.T) {
	e := clitest.NewEnv(t)
	offsite := filepath.Join(e.Dir, "offsite")
	pw := filepath.Join(e.Dir, "offsite.pw")
	if err := os.WriteFile(pw, []byte(e.Vars["COFFER_PASSWORD"]), 0o600); err != nil {
		t.Fatal(err)
	}
	e.Must("init")
	e.Must("init", "--repo", offsite)
	l, tok := startLife(t, e, fmt.Sprintf(`
repositories:
  - {name: offsite, location: %q, password-file: %q}
connections:
  - {name: lab, kind: fake, options: {seed: 9, vms: 2, hosts: 1, datastores: 1, disk-size: 64KiB}}
policies:
  - {name: nightly, connection: lab}
maintenance:
  repositories:
    - repository: default
      copy: [{to: offsite, after: nightly}]
`, offsite, pw), time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC))
	remote := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := e.Remote(l.server, tok, args...)
		if code != want {
			t.Fatalf("coffer %v: exit %d, want %d\n%s%s", args, code, want, out, errOut)
		}
		return out + errOut
	}
	remote(0, "run", "nightly")
	runs := l.jobsOf(catalog.KindBackupPolicy)
	if len(runs) != 1 || runs[0].Status != catalog.StatusSuccess {
		t.Fatalf("runs of nightly: %+v", runs)
	}
	run := runs[0]
	if ev, ok := l.logged(run.ID, "copy-after"); !ok || ev.Fields["copy_after"] != "default/copy:offsite/after:nightly" {
		events, _ := l.cat.JobLog(l.ctx, run.ID, 0, 0)
		t.Fatalf("the run's log does not record its pending copy: %+v\n%+v\n%s", ev, events, l.server.Log())
	}
	if cps := l.jobsOf(catalog.KindCopy); len(cps) != 0 {
		t.Fatalf("a copy began while the clock stood still: %+v", cps)
	}
	if err := l.server.Stop(); err != nil {
		t.Fatalf("server after SIGTERM: %v", err)
	}

	l.server = e.StartServer()
	var cp catalog.Job
	l.until("the pending copy ran after the restart", func() bool {
		cps := l.jobsOf(catalog.KindCopy)
		if len(cps) > 0 && cps[0].Status == catalog.StatusFailed {
			t.Fatalf("the copy failed: %s", cps[0].Error)
		}
		if len(cps) == 1 && cps[0].Status == catalog.StatusSuccess {
			cp = cps[0]
			return true
		}
		return false
	})
	follows, ok := l.logged(cp.ID, "copies-after")
	started, ok2 := l.logged(run.ID, "copy-after-started")
	if !ok || !ok2 || follows.Fields["copies_after"] != float64(run.ID) || started.Fields["copy_job"] != float64(cp.ID) {
		t.Fatalf("the two jobs do not name each other: copy %d says %+v, run %d says %+v", cp.ID, follows, run.ID, started)
	}
	l.holdsExactly(offsite, run.ID)
	t.Logf("run %d's points copied by job %d after the restart", run.ID, cp.ID)

	l.scheduleThroughTheAPI(remote)
	if err := l.server.Stop(); err != nil {
		t.Fatalf("server after SIGTERM: %v", err)
	}
}

// holdsExactly checks that repository dir holds exactly the points run
// made.
func (l *lifeEnv) holdsExactly(dir string, run int64) {
	t := l.t
	t.Helper()
	tasks, err := l.cat.ListTasks(l.ctx, catalog.TaskFilter{JobID: run})
	if err != nil {
		t.Fatal(err)
	}
	var made []string
	for _, tk := range tasks {
		made = append(made, tk.BackupPointID)
	}
	out, err := l.e.Child("snapshots", "--json", "--repo", dir).Output()
	if err != nil {
		t.Fatal(err)
	}
	var points []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(out, &points); err != nil {
		t.Fatal(err)
	}
	var copied []string
	for _, p := range points {
		copied = append(copied, p.ID)
	}
	slices.Sort(made)
	slices.Sort(copied)
	if len(made) != 2 || !slices.Equal(made, copied) {
		t.Fatalf("%s holds %v, want run %d's points %v", dir, copied, run, made)
	}
}

// scheduleThroughTheAPI creates a maintenance schedule through the API
// and checks that the running scheduler takes it, and where config show
// says each schedule comes from.
func (l *lifeEnv) scheduleThroughTheAPI(remote func(want int, args ...string) string) {
	t, e := l.t, l.e
	t.Helper()
	// A maintenance schedule through the API, taken by the scheduler
	// that runs now.
	spec := filepath.Join(e.Dir, "gc.yaml")
	if err := os.WriteFile(spec, []byte("repository: offsite\ngc: {schedule: \"0 3 * * *\", timezone: UTC}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	remote(0, "config", "create", "maintenance-schedule", "-f", spec)
	l.runAt("gc", time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC))
	l.claimed("maintenance/offsite/gc", time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC))
	var show api.ConfigShow
	if err := json.Unmarshal([]byte(remote(0, "config", "show", "--json")), &show); err != nil {
		t.Fatal(err)
	}
	var sources []string
	for _, o := range show.Objects {
		if o.Kind == "maintenance-schedule" {
			sources = append(sources, o.Name+":"+o.Source)
		}
	}
	if strings.Join(sources, " ") != "default:file offsite:catalog" {
		t.Fatalf("config show lists the maintenance schedules as %v", sources)
	}
	if err := os.WriteFile(spec, []byte("repository: default\ngc: {schedule: \"@daily\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := remote(2, "config", "create", "maintenance-schedule", "-f", spec); !strings.Contains(out, "is defined in the configuration file") {
		t.Fatalf("creating the file's repository's schedule:\n%s", out)
	}
}
