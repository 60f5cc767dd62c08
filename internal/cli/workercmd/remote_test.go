package workercmd_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
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
	e := pgEnv(t, testutil.StartPostgres(t))
	e.Config(unitsConfig)
	srv := e.StartServer()
	token := e.AdminToken()
	onWorker := t.TempDir()
	registered := func(s *clitest.ServerProc) bool { return strings.Contains(s.Stderr.String(), "worker registered") }
	e.StartCoffer(registered, patience, "worker", "--name", "kvm1", "--slots", "2", "--reach-connections", "east,west",
		"--restore-dir", onWorker, "--heartbeat", beat.String(), "--dead-after", dead.String(), "--log-level", "info")
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
