package upgradecmd_test

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// binHost runs another coffer binary where clitest runs this test's.
type binHost struct{ bin string }

func (h binHost) Command(_ string, args ...string) *exec.Cmd { return exec.Command(h.bin, args...) }

// holderOf waits until the schedules' lease is held by the server of
// pid, reading the catalog without opening it (a test process of this
// build must not migrate it, nor refuse a newer one), and returns how
// long that took from since.
func holderOf(t *testing.T, ctx context.Context, dsn string, pid int, since time.Time) time.Duration {
	t.Helper()
	want := fmt.Sprintf("/%d/", pid)
	for {
		sc, err := catalogopen.ReadSchema(ctx, dsn)
		if err != nil && !errors.Is(err, catalog.ErrNewerSchema) {
			t.Fatal(err)
		}
		for _, l := range sc.Leases {
			if l.Name == "schedules" && strings.Contains(l.Holder, want) && l.ExpiresAt.After(time.Now()) {
				return time.Since(since)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the schedules' lease never went to the server of PID %d: %+v", pid, sc.Leases)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestRollingUpgradeOnPostgreSQL upgrades servers sharing a PostgreSQL
// catalog in the order docs/upgrading.md gives, twice:
//
//  1. the last release's real build against this one: the release's
//     server holds the schedules; this build's server starts beside it
//     and migrates (v0.1.0 and this build have the same schema, so
//     nothing is pending: the test logs it); the release's server stops
//     and the lease moves to this build's within the takeover time;
//  2. the schema step, simulated honestly with this build playing both
//     versions: a server of this build knowing one more migration
//     (COFFER_TEST_NEXT_SCHEMA) starts and migrates; the server already
//     running, older than the catalog now, refuses new work with the
//     class unsupported-version, keeps answering reads, gives the lease
//     up and never crashes; the lease moves to the newer server.
func TestRollingUpgradeOnPostgreSQL(t *testing.T) {
	prevBin := previousBuild(t)
	tag, _ := previous(t)
	dsn := testutil.StartPostgres(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute) // only catches a hang
	defer cancel()
	const takeover = 3 * time.Second
	e := clitest.NewEnv(t)
	e.Vars["COFFER_CATALOG"] = dsn
	e.Config(fmt.Sprintf("maintenance:\n  takeover-after: %s\n", takeover))
	old := &clitest.Env{T: t, Dir: e.Dir, Repo: e.Repo, Vars: e.Vars, Host: binHost{prevBin}}
	if out, err := old.Child("init").CombinedOutput(); err != nil {
		t.Fatalf("%s init: %v\n%s", tag, err, out)
	}

	// 1. The release's server, then this build's beside it.
	prevSrv := old.StartServer()
	holderOf(t, ctx, dsn, prevSrv.Cmd.Process.Pid, time.Now())
	sc, err := catalogopen.ReadSchema(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s's catalog: schema %d; this build knows %d, pending %d (the same schema: nothing to migrate)", tag, sc.Applied, sc.Known, len(sc.Pending))
	head := e.StartServer()
	stopped := time.Now()
	if err := prevSrv.Stop(); err != nil {
		t.Fatalf("%s's server did not stop cleanly: %v\n%s", tag, err, prevSrv.Log())
	}
	took := holderOf(t, ctx, dsn, head.Cmd.Process.Pid, stopped)
	// Logged, not asserted: docs/upgrading.md records the figures.
	t.Logf("the schedules' lease moved from %s's server to this build's %v after SIGTERM (takeover time %v)", tag, took.Round(time.Millisecond), takeover)

	// 2. The schema step: this build's server is the older one now.
	token := e.AdminToken()
	var j api.Job
	if code, _ := head.Call(token, "POST", "/repositories/default/verify", map[string]any{}, &j); code >= 300 {
		t.Fatalf("verify before the upgrade: HTTP %d", code)
	}
	e.Vars["COFFER_TEST_NEXT_SCHEMA"] = "1"
	newer := e.StartServer()
	delete(e.Vars, "COFFER_TEST_NEXT_SCHEMA")
	started := time.Now()
	if sc, err := catalogopen.ReadSchema(ctx, dsn); !errors.Is(err, catalog.ErrNewerSchema) {
		t.Fatalf("the newer server did not migrate the catalog: schema %d, this test knows %d (%v)", sc.Applied, sc.Known, err)
	}
	took = holderOf(t, ctx, dsn, newer.Cmd.Process.Pid, started)
	t.Logf("after the newer server migrated the catalog, the lease moved to it in %v (takeover time %v)", took.Round(time.Millisecond), takeover)
	var problem struct {
		Class  api.Class `json:"class"`
		Detail string    `json:"detail"`
	}
	code, _ := head.Call(token, "POST", "/repositories/default/verify", map[string]any{}, &problem)
	if problem.Class != api.UnsupportedVersion || !strings.Contains(problem.Detail, "older than the catalog") {
		t.Errorf("new work on the older server after the migration: HTTP %d %+v, want the class unsupported-version", code, problem)
	}
	var jobs []api.Job
	if code, _ := head.Call(token, "GET", "/jobs", nil, &jobs); code != 200 {
		t.Errorf("a read from the older server after the migration: HTTP %d, want 200", code)
	}
	if !strings.Contains(head.Log(), "a newer coffer migrated the catalog") {
		t.Errorf("the older server's log does not say why it stepped down:\n%s", head.Log())
	}
	select {
	case err := <-head.Done:
		t.Fatalf("the older server exited after the migration: %v\n%s", err, head.Log())
	default:
	}
	if err := head.Stop(); err != nil {
		t.Errorf("the older server did not stop cleanly: %v\n%s", err, head.Log())
	}
	if err := newer.Stop(); err != nil {
		t.Errorf("the newer server did not stop cleanly: %v", err)
	}
}
