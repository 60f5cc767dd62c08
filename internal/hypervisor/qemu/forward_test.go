package qemu

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestLaunchForwardedChoosesATakenPortAgain: a port another process
// bound after it was chosen makes QEMU refuse to start; LaunchForwarded
// chooses again, and QEMU starts with the new port forwarded.
func TestLaunchForwardedChoosesATakenPortAgain(t *testing.T) {
	exe := testutil.RequireBinary(t, "qemu-system-x86_64")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenPort := taken.Addr().(*net.TCPAddr).Port
	ports := []int{takenPort}
	choose := func() (int, error) {
		if len(ports) > 0 {
			p := ports[0]
			ports = ports[1:]
			return p, nil
		}
		return FreePort()
	}
	spec := LaunchSpec{Dir: t.TempDir(), Name: "fwd"}
	var launchErrs []error
	forward, err := LaunchForwarded([]int{22, 22}, choose, func(fwd map[int]int) error {
		args := []string{exe, "-accel", "tcg", "-display", "none", "-S", "-nodefaults",
			"-netdev", fmt.Sprintf("user,id=n0,restrict=on,hostfwd=tcp:127.0.0.1:%d-:22", fwd[22]),
			"-device", "e1000,netdev=n0", "-daemonize", "-pidfile", spec.PIDPath()}
		pid, err := Launch(context.Background(), args, spec)
		launchErrs = append(launchErrs, err)
		if err == nil {
			t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
		}
		return err
	})
	if err != nil {
		t.Fatalf("LaunchForwarded: %v (launches: %v)", err, launchErrs)
	}
	if len(launchErrs) != 2 || !ForwardTaken(launchErrs[0]) {
		t.Fatalf("launches %v: want a refusal for the taken port, then a start", launchErrs)
	}
	if forward[22] == takenPort || forward[22] == 0 || len(forward) != 1 {
		t.Fatalf("forwards %v: want guest port 22 on a port other than the taken %d", forward, takenPort)
	}
	b, err := os.ReadFile(spec.PIDPath())
	if err != nil {
		t.Fatal(err)
	}
	if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err != nil || syscall.Kill(pid, 0) != nil {
		t.Fatalf("QEMU is not running (pid file %q)", b)
	}
}

// TestLaunchForwardedStopsOnOtherErrors: another failure is returned at
// once, and ports taken three times in a row give up with a clear error.
func TestLaunchForwardedStopsOnOtherErrors(t *testing.T) {
	choose := func() (int, error) { return 40000, nil }
	calls := 0
	_, err := LaunchForwarded([]int{80}, choose, func(map[int]int) error { calls++; return errors.New("no such disk") })
	if err == nil || calls != 1 {
		t.Fatalf("another error: %v after %d launches, want it after 1", err, calls)
	}
	calls = 0
	_, err = LaunchForwarded([]int{80}, choose, func(map[int]int) error {
		calls++
		return errors.New("start qemu: exit status 1: Could not set up host forwarding rule 'tcp:127.0.0.1:40000-:80'")
	})
	if !ForwardTaken(err) || calls != forwardTries || !strings.Contains(err.Error(), "each of 3 tries") {
		t.Fatalf("ports always taken: %v after %d launches", err, calls)
	}
	if _, err := LaunchForwarded([]int{80}, func() (int, error) { return 0, errors.New("no port") }, nil); err == nil {
		t.Fatal("a failed choice was not returned")
	}
}
