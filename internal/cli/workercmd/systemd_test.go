package workercmd_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestWorkerUnderSystemd runs `coffer worker` as coffer-worker.service
// does: its token is the unit's credential worker-token (no --token-file),
// it says READY=1 once registered and STOPPING=1 when SIGTERM drains it.
func TestWorkerUnderSystemd(t *testing.T) {
	e := pgEnv(t, testutil.StartPostgres(t))
	login := e.WorkerLogin("kvm1") // --catalog ADDRESS --token-file FILE
	creds := filepath.Join(e.Dir, "credentials")
	if err := os.Mkdir(creds, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(login[3], filepath.Join(creds, "worker-token")); err != nil {
		t.Fatal(err)
	}
	expect := e.NotifySocket()
	e.Vars["CREDENTIALS_DIRECTORY"] = creds
	e.Vars["STATE_DIRECTORY"] = filepath.Join(e.Dir, "state")
	w := e.Child("worker", login[0], login[1], "--slots", "1")
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Process.Kill() //nolint:errcheck // a failed test's leftover
	if msg := expect("READY=1"); !containsLine(msg, "STATUS=registered as worker kvm1") {
		t.Errorf("READY=1 came with %q", msg)
	}
	if err := w.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	expect("STOPPING=1")
	if err := w.Wait(); err != nil {
		t.Fatalf("the worker after SIGTERM: %v", err)
	}
}

func containsLine(msg, line string) bool {
	return slices.Contains(strings.Split(msg, "\n"), line)
}
