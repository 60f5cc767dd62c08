package servercmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// hooks records the events a webhook target receives.
type hooks struct {
	mu     sync.Mutex
	events []hookEvent
}

type hookEvent struct {
	Type   string            `json:"type"`
	Labels map[string]string `json:"labels"`
	Task   *struct {
		Kind   string `json:"kind"`
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"task"`
}

func (h *hooks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var ev hookEvent // the body is the event, with the delivery's fields
	b, _ := io.ReadAll(r.Body)
	if json.Unmarshal(b, &ev) == nil {
		h.mu.Lock()
		h.events = append(h.events, ev)
		h.mu.Unlock()
	}
	w.WriteHeader(http.StatusNoContent)
}

// notified reports whether the target was told that job id succeeded.
func (h *hooks) notified(id int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, ev := range h.events {
		if ev.Type == "task-succeeded" && ev.Task != nil && ev.Task.ID == strconv.FormatInt(id, 10) {
			return true
		}
	}
	return false
}

// lifeEnv is a server's world for the scheduled jobs' whole life: the
// test's clock, the catalog and the webhook target.
type lifeEnv struct {
	t      *testing.T
	ctx    context.Context
	e      *clitest.Env
	clock  *testutil.FileClock
	cat    catalog.Catalog
	hooks  *hooks
	server *clitest.ServerProc
}

// until polls cond (the catalog, the clock's waits) within the test's
// bound; the server's exit fails the test.
func (l *lifeEnv) until(what string, cond func() bool) {
	l.t.Helper()
	for !cond() {
		select {
		case <-l.ctx.Done():
			l.t.Fatalf("%s: not within the test's bound\n%s", what, l.server.Log())
		case err := <-l.server.Done:
			l.t.Fatalf("%s: the server exited: %v\n%s", what, err, l.server.Log())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// runAt moves the test's clock to slot once the server's schedules wait
// for it, and waits until a job of kind recorded that slot, ended with
// success and was notified; it returns the job.
func (l *lifeEnv) runAt(kind string, slot time.Time) catalog.Job {
	l.t.Helper()
	l.until(fmt.Sprintf("the schedules wait for %s", slot), func() bool { return l.clock.WaitedFor(l.t, slot) })
	l.clock.Set(l.t, slot)
	return l.recorded(kind, slot)
}

// recorded waits until a job of kind logged slot as its scheduled run,
// succeeded and was notified.
func (l *lifeEnv) recorded(kind string, slot time.Time) catalog.Job {
	l.t.Helper()
	want := kind + "@" + slot.UTC().Format(time.RFC3339)
	var job catalog.Job
	defer func() {
		if l.t.Failed() {
			l.t.Logf("scheduled runs: %+v; notified: %+v", scheduledRuns(l.t, l.cat), l.hooks.events)
		}
	}()
	l.until("a "+want+" run recorded, succeeded and notified", func() bool {
		for _, r := range scheduledRuns(l.t, l.cat) {
			if r.slot != want {
				continue
			}
			j, err := l.cat.GetJob(l.ctx, r.job)
			if err != nil {
				l.t.Fatal(err)
			}
			if j.Status == catalog.StatusFailed {
				l.t.Fatalf("%s failed: %s", want, j.Error)
			}
			job = j
			return j.Status == catalog.StatusSuccess && r.user == "@schedule" && l.hooks.notified(j.ID)
		}
		return false
	})
	return job
}

// claimed checks the catalog's newest claim of a schedule.
func (l *lifeEnv) claimed(schedule string, slot time.Time) {
	l.t.Helper()
	last, ok, err := l.cat.LastRun(l.ctx, schedule)
	if err != nil || !ok || !last.Equal(slot) {
		l.t.Fatalf("the newest claim of %s is %s (%v, %v), want %s", schedule, last, ok, err, slot)
	}
}

// TestScheduledJobsThroughTheirLife runs `coffer server` on a clock the
// test drives (COFFER_TEST_CLOCK), from the evening of 28 March 2026 in
// Europe/Berlin: a policy at 22:00, a forget at 01:00 and a copy to a
// second repository at 02:30, which that night falls in the hour the
// clocks skip. Each is scheduled (the server waits for its slot), claimed
// in the catalog, run, recorded with its slot and notified to a webhook
// the test serves. The copy runs at the jump (03:00 CEST). Then the
// server stops, the next night's forget passes while it is down, and
// the server started again catches it up once (missed: run-once).
func TestScheduledJobsThroughTheirLife(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // only catches a hang
	defer cancel()
	h := &hooks{}
	hook := httptest.NewServer(h)
	defer hook.Close()
	e := clitest.NewEnv(t)
	offsite := filepath.Join(e.Dir, "offsite")
	pw := filepath.Join(e.Dir, "offsite.pw")
	if err := os.WriteFile(pw, []byte(e.Vars["COFFER_PASSWORD"]), 0o600); err != nil {
		t.Fatal(err)
	}
	e.Must("init")
	e.Must("init", "--repo", offsite)
	e.Config(fmt.Sprintf(`
repositories:
  - {name: offsite, location: %q, password-file: %q}
connections:
  - name: lab
    kind: fake
    options: {seed: 9, vms: 2, hosts: 1, datastores: 1, disk-size: 64KiB}
policies:
  - {name: nightly, connection: lab, schedule: "0 22 * * *", timezone: Europe/Berlin, retention: {keep-last: 5}}
maintenance:
  repositories:
    - repository: default
      forget: {schedule: "0 1 * * *", timezone: Europe/Berlin, policies: [nightly]}
      copy: [{to: offsite, schedule: "30 2 * * *", timezone: Europe/Berlin}]
notifications:
  targets: [{name: hook, webhook: {url: %q}}]
  matchers: [{name: every-end, targets: [hook], types: [task-succeeded, task-failed]}]
`, offsite, pw, hook.URL))
	clock := testutil.NewFileClock(t, e.Dir, time.Date(2026, 3, 28, 20, 0, 0, 0, time.UTC)) // 21:00 CET
	e.Vars["COFFER_TEST_CLOCK"] = clock.Path
	cat, err := catalogopen.Open(ctx, e.Vars["COFFER_CATALOG"])
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	l := &lifeEnv{t: t, ctx: ctx, e: e, clock: clock, cat: cat, hooks: h, server: e.StartServer()}

	nightly := time.Date(2026, 3, 28, 21, 0, 0, 0, time.UTC) // 22:00 CET
	oneAM := time.Date(2026, 3, 29, 0, 0, 0, 0, time.UTC)    // 01:00 CET
	jump := time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC)     // 02:00 CET is 03:00 CEST
	backup := l.runAt("backup-policy", nightly)
	forget := l.runAt("forget", oneAM)
	cp := l.runAt("copy", jump)
	t.Logf("jobs %d (backup), %d (forget), %d (copy at the jump, 03:00 CEST)", backup.ID, forget.ID, cp.ID)
	l.claimed("policy/nightly", nightly)
	l.claimed("maintenance/default/forget", oneAM)
	l.claimed("maintenance/default/copy:offsite", jump)
	if backup.TasksTotal != 2 {
		t.Fatalf("the scheduled backup had %d VM tasks, want 2", backup.TasksTotal)
	}
	// In a process of its own: this one holds the catalog open.
	out, err := e.Child("snapshots", "--json", "--repo", offsite).Output()
	if err != nil {
		t.Fatal(err)
	}
	var points []json.RawMessage
	if err := json.Unmarshal(out, &points); err != nil || len(points) != 2 {
		t.Fatalf("the offsite repository holds %d points (%v), want the 2 copied", len(points), err)
	}

	// Down over the next night's forget (01:00 CEST on 30 March is
	// 23:00 UTC on the 29th); the copy's next run (02:30 CEST) is not yet
	// due when the server starts again.
	if err := l.server.Stop(); err != nil {
		t.Fatalf("server after SIGTERM: %v", err)
	}
	clock.Set(t, time.Date(2026, 3, 30, 0, 10, 0, 0, time.UTC))
	l.server = e.StartServer()
	missed := time.Date(2026, 3, 29, 23, 0, 0, 0, time.UTC)
	caught := l.recorded("forget", missed)
	events, err := cat.JobLog(ctx, caught.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	marked := false
	for _, ev := range events {
		marked = marked || ev.Fields["missed"] == true
	}
	if !marked {
		t.Fatalf("the caught-up forget (job %d) does not say it was missed: %+v", caught.ID, events)
	}
	l.claimed("maintenance/default/forget", missed)
	l.claimed("maintenance/default/copy:offsite", jump) // not due: nothing caught up
	if err := l.server.Stop(); err != nil {
		t.Fatalf("server after SIGTERM: %v", err)
	}
}
