package workercmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
)

// TestRestoreRunsOnTheNamedWorker: a policy run with `coffer run` through a
// server runs in the server's engine, on the worker; then a restore that
// names a worker (the API's
// ?worker=, the command line's --worker through a server) runs on that
// worker, on its host: the disk lands under the worker's restore
// directory, byte for byte the disk the server restores itself. The worker
// confines the request's path as a server does, and the server refuses a
// worker that is not registered.
func TestRestoreRunsOnTheNamedWorker(t *testing.T) {
	e, address := tokenEnv(t)
	e.Config(tokenConfig)
	srv := e.StartServer()
	token := e.AdminToken()
	cat := openCatalog(t, e)
	_, tokenFile := createToken(e, "kvm1")
	onWorker := t.TempDir()
	registered := func(s *clitest.ServerProc) bool { return strings.Contains(s.Stderr.String(), "worker registered") }
	e.StartCoffer(registered, patience, "worker", "--catalog", address, "--token-file", tokenFile, "--slots", "2",
		"--reach-connections", "east,west", "--restore-dir", onWorker, "--heartbeat", tokenBeat.String(),
		"--dead-after", tokenDead.String(), "--log-level", "info")
	waitLog(t, srv, "the engine given the worker", "the engine places units on the workers", "workers=kvm1")
	// `coffer run` through the server: its engine places the units on
	// the worker (the command line here has no repository of its own).
	code, stdout, stderr := e.Remote(srv, token, "run", "fleet", "--json")
	var run api.Job
	if code != 0 || json.Unmarshal([]byte(stdout), &run) != nil || run.Status != "success" || run.TasksOK != 6 {
		t.Fatalf("coffer run through the server: exit %d\n%s\n%s", code, stdout, stderr)
	}

	there := restoreJSON(t, e, srv, token, "latest", "--disk", "0", "--to", "vm.raw", "--worker", "kvm1")
	if !strings.HasPrefix(there.Target, onWorker+string(filepath.Separator)) {
		t.Fatalf("the restore on kvm1 wrote %s, not under its restore directory %s", there.Target, onWorker)
	}
	checkRestoreJobs(t, cat, there.PointID)
	here := restoreJSON(t, e, srv, token, there.PointID, "--disk", "0", "--to", "vm.raw")
	if here.Target == there.Target {
		t.Fatalf("the server's restore wrote the worker's file %s", here.Target)
	}
	a, errA := os.ReadFile(there.Target)
	b, errB := os.ReadFile(here.Target)
	if errA != nil || errB != nil || len(a) == 0 || !bytes.Equal(a, b) {
		t.Fatalf("the disk restored on kvm1 (%d bytes, %v) differs from the server's (%d bytes, %v)", len(a), errA, len(b), errB)
	}

	if code, _, stderr := e.Remote(srv, token, "restore", there.PointID, "--disk", "0", "--to", "../out.raw", "--worker", "kvm1"); code != 2 || !strings.Contains(stderr, "climbs out") {
		t.Errorf("a path out of the worker's restore directory: exit %d, %s", code, stderr)
	}
	if code, _, stderr := e.Remote(srv, token, "restore", there.PointID, "--disk", "0", "--to", "x.raw", "--worker", "nosuch"); code != 7 || !strings.Contains(stderr, "no worker nosuch") {
		t.Errorf("an unknown worker: exit %d, %s", code, stderr)
	}
}

// checkRestoreJobs wants the restore on the worker recorded once, by the
// server, as a restore job that succeeded and whose log says where it ran
// (the worker's role may not write jobs, and records none of its own).
func checkRestoreJobs(t *testing.T, cat catalog.Catalog, point string) {
	t.Helper()
	jobs, err := cat.ListJobs(context.Background(), catalog.JobFilter{Kind: "restore"})
	if err != nil || len(jobs) != 1 || jobs[0].Status != catalog.StatusSuccess {
		t.Fatalf("restore jobs after a restore on kvm1: %+v, %v", jobs, err)
	}
	evs, err := cat.ListEvents(context.Background(), catalog.EventFilter{JobID: jobs[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if strings.Contains(ev.Message, "restore-disk runs on worker kvm1") {
			return
		}
	}
	t.Fatalf("restore job %d of point %s does not say it ran on kvm1: %+v", jobs[0].ID, point, evs)
}

// restoreJSON restores one disk through the server and returns what the
// command reported.
func restoreJSON(t *testing.T, e *clitest.Env, srv *clitest.ServerProc, token string, args ...string) api.RestoredDisk {
	t.Helper()
	code, stdout, stderr := e.Remote(srv, token, append([]string{"restore", "--json"}, args...)...)
	var out []api.RestoredDisk
	if code != 0 || json.Unmarshal([]byte(stdout), &out) != nil || len(out) != 1 {
		t.Fatalf("restore %v: exit %d\n%s\n%s\nserver:\n%s", args, code, stdout, stderr, srv.Log())
	}
	return out[0]
}
