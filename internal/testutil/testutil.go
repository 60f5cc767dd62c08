// Package testutil holds helpers shared by tests that drive real components
// (QEMU, qemu-storage-daemon, S3 servers, PostgreSQL, Chromium).
//
// Integration tests call RequireBinary for every external program they need.
// On a developer machine a missing program skips the test; in CI
// (COFFER_REQUIRE_INTEGRATION=1, set by .ci/run) it fails it, so a missing
// install step can never turn into a silently green run.
package testutil

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Strict reports whether integration prerequisites are mandatory.
func Strict() bool { return os.Getenv("COFFER_REQUIRE_INTEGRATION") == "1" }

// RequireBinary returns the path of program, or skips (fails in CI) the test.
func RequireBinary(t testing.TB, program string) string {
	t.Helper()
	path, err := exec.LookPath(program)
	if err == nil {
		return path
	}
	if Strict() {
		t.Fatalf("%s is required in CI but was not found: %v", program, err)
	}
	t.Skipf("%s not installed; skipping (set COFFER_REQUIRE_INTEGRATION=1 to make this fatal)", program)
	return ""
}

// RequireRoot skips (fails in CI) a test that needs root, e.g. for runuser.
func RequireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if Strict() {
		t.Fatal("this test must run as root in CI")
	}
	t.Skip("needs root")
}

// KillPIDFile kills the process whose PID is in path (a daemon started with
// --pid-file) and waits until it has exited. A zombie counts as exited: it
// holds no file or socket any more, and a daemonized process is reaped by
// init, which on some machines does so only about once a second.
func KillPIDFile(t testing.TB, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Logf("pid file %s: %v", path, err)
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Logf("pid file %s: %v", path, err)
		return
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	// Not our child, so no wait(2): poll its state in /proc.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if exited(pid) {
			return
		}
	}
	t.Errorf("process %d (%s) did not exit after SIGKILL", pid, path)
}

// exited reports whether pid is gone or a zombie.
func exited(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state letter follows the parenthesised command name.
	i := bytes.LastIndexByte(stat, ')')
	return i > 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}
