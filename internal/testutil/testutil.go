// Package testutil holds helpers shared by tests that drive real components
// (QEMU, qemu-storage-daemon, S3 servers, PostgreSQL, Chromium).
//
// Integration tests call RequireBinary for every external program they need.
// On a developer machine a missing program skips the test; in CI
// (COFFER_REQUIRE_INTEGRATION=1, set by .ci/run) it fails it, so a missing
// install step can never turn into a silently green run.
package testutil

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/ovmf"
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

// RequireOVMF returns this host's UEFI firmware for QEMU, or skips (fails
// in CI) the test.
func RequireOVMF(t testing.TB) ovmf.Firmware {
	t.Helper()
	fw, ok := ovmf.Find()
	if !ok {
		if Strict() {
			t.Fatal("OVMF is required in CI but was not found: run scripts/ci/install-qemu.sh (the ovmf package)")
		}
		t.Skip("OVMF not installed (the ovmf package); skipping (set COFFER_REQUIRE_INTEGRATION=1 to make this fatal)")
	}
	return fw
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
// --pid-file) and waits until it has exited. It is not our child, so no
// wait(2): a pidfd, which turns readable when the process exits (a zombie
// counts: it holds no file or socket any more, and a daemonized process is
// reaped by init, on some machines only about once a second).
func KillPIDFile(t testing.TB, path string) {
	t.Helper()
	if err := killPIDFile(path); errors.Is(err, errPIDFile) {
		t.Logf("%v", err)
	} else if err != nil {
		t.Errorf("%v", err)
	}
}

var errPIDFile = errors.New("pid file")

// KillDaemon is KillPIDFile for callers without a test (benchmarks): it
// returns what went wrong instead of failing a test.
func KillDaemon(path string) error { return killPIDFile(path) }

// killPIDFile is KillPIDFile for callers without a test (KillDaemon).
func killPIDFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w %s: %v", errPIDFile, path, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("%w %s: %v", errPIDFile, path, err)
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil // no such process: already gone
	}
	defer func() { _ = unix.Close(fd) }() // a pidfd
	_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, 10_000)
		if err == unix.EINTR {
			continue
		}
		if err != nil || n == 0 {
			return fmt.Errorf("process %d (%s) did not exit after SIGKILL: %v", pid, path, err)
		}
		return nil
	}
}
