package testutil

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The kill tests run the code under test in a child process (this test
// binary, re-run for one test), wait until it reaches a chosen point, and
// SIGKILL it there: what a killed coffer leaves behind is then real, not
// simulated. The parent calls KillAtPoint; the child test starts with
// KillChild and calls KillPoint where it wants to be killed.

// killChildEnv names the one test a child process runs as a kill child.
const killChildEnv = "COFFER_KILL_CHILD"

// killPointLine is what a child prints when it reaches its kill point.
const killPointLine = "COFFER-KILL-POINT-REACHED"

// KillAtPoint runs the test named child of this test binary in a child
// process, with env ("NAME=value") added to its environment, reads its
// standard output until it calls KillPoint, and SIGKILLs it there. The
// test fails, with what the child printed, when the child ends before
// its kill point.
func KillAtPoint(t testing.TB, child string, env ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+child+"$", "-test.v", "-test.count=1")
	cmd.Env = append(append(os.Environ(), killChildEnv+"="+child), env...)
	cmd.Stderr = os.Stderr
	// The child waits on its standard input at the kill point: should
	// this process die first, the child sees the end of it and exits.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close() }()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var printed strings.Builder
	reached := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if sc.Text() == killPointLine {
			reached = true
			break
		}
		printed.WriteString(sc.Text() + "\n")
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if !reached {
		t.Fatalf("the child %s ended before its kill point:\n%s", child, printed.String())
	}
}

// KillChild skips t unless this process is the child KillAtPoint
// started for it.
func KillChild(t *testing.T) {
	t.Helper()
	if os.Getenv(killChildEnv) != t.Name() {
		t.Skip("the child process of a kill test: its parent runs it")
	}
}

// KillPoint tells the parent that the child is where it is to be killed,
// and waits for the SIGKILL. It never returns: if the parent is gone
// instead (its end of the standard input closed), the child exits.
func KillPoint() {
	fmt.Println(killPointLine)
	_, _ = io.Copy(io.Discard, os.Stdin)
	fmt.Fprintln(os.Stderr, "the parent of this kill child is gone")
	os.Exit(2)
}
