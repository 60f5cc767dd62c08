package servercmd_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
)

// TestServerUnderSystemd runs `coffer server` as coffer.service does:
// Type=notify, StateDirectory= and no catalog or state directory of its
// own. It says READY=1 once it serves, keeps its catalog in
// $STATE_DIRECTORY, reloads its configuration file on SIGHUP (a file it
// would refuse is logged and the one in effect stays), and says
// STOPPING=1 when SIGTERM drains it.
func TestServerUnderSystemd(t *testing.T) {
	e := clitest.NewEnv(t)
	for _, v := range []string{"COFFER_CATALOG", "COFFER_REPO", "COFFER_PASSWORD"} {
		delete(e.Vars, v)
	}
	state := filepath.Join(e.Dir, "state")
	expect := e.NotifySocket()
	e.Vars["STATE_DIRECTORY"] = state
	if err := os.Mkdir(state, 0o700); err != nil { // systemd makes it
		t.Fatal(err)
	}
	server := e.Child("server", "--insecure-http", "--listen", "127.0.0.1:0", "--log-level", "info")
	logs := &syncBuffer{}
	server.Stderr = logs
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	defer server.Process.Kill() //nolint:errcheck // a failed test's leftover
	expect("READY=1")
	if _, err := os.Stat(filepath.Join(state, "catalog.db")); err != nil {
		t.Fatalf("the catalog is not in $STATE_DIRECTORY: %v", err)
	}
	e.Config("connections: [{name: lab, kind: fake}]\npolicies: [{name: often, connection: lab, schedule: \"@every 1h\"}]\n")
	if err := server.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	expect("RELOADING=1")
	expect("READY=1")
	waitLog(t, logs, "configuration reloaded", "policies=1")

	e.Config("policies: [{name: often, connection: gone}]\n")
	if err := server.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	expect("READY=1")
	waitLog(t, logs, "the configuration file is refused", `unknown connection \"gone\"`)

	if err := server.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	expect("STOPPING=1")
	if err := server.Wait(); err != nil {
		t.Fatalf("server after SIGTERM: %v\n%s", err, logs)
	}
}

// waitLog waits for a line of the server's log holding every one of
// parts.
func waitLog(t *testing.T, logs *syncBuffer, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a failure guard
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		for _, line := range strings.Split(logs.String(), "\n") {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q:\n%s", parts, logs)
		}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
