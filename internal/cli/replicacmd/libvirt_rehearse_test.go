package replicacmd_test

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
)

// testScripts writes a plan's script in dir: "check" waits until the
// test copy's guest has checked its self-verifying blocks on its overlay
// (COFFER CHECK OK on the copy's serial console) and says where; "kill"
// kills the coffer running the test (its parent) with SIGKILL.
func testScripts(t *testing.T, dir, name string) string {
	t.Helper()
	body := map[string]string{
		"check": `i=0
while ! grep -q 'COFFER CHECK OK' "$COFFER_VM_DIR/console.log" 2>/dev/null; do
  i=$((i+1)); [ $i -gt 1500 ] && { echo "the copy's guest never checked its blocks"; exit 1; }
  sleep 0.2 # polling the console file: it has no change notification
done
echo "$COFFER_VM checked its blocks in $COFFER_VM_DIR"`,
		"kill": `kill -9 $PPID`,
	}[name]
	path := filepath.Join(dir, name+".sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// testFailoverOfTheStandbyDomain: a test failover of a standby kept as a
// libvirt domain starts a transient copy of it (coffer-test-*) on a qcow2
// overlay above the newest point, in a directory next to the standby,
// isolated (its interfaces replaced by QEMU's restricted user-mode
// network), with its serial console of its own; the guest checks its
// self-verifying blocks on it (the plan's script reads its console), and
// afterwards no copy runs, no overlay or run directory is left, the
// standby's files are as before and the source (paused) is untouched:
// still paused, its console log unwritten. A coffer killed with SIGKILL
// mid-test leaves its copy running; the next server start ends it and
// removes its overlays before it serves.
func testFailoverOfTheStandbyDomain(t *testing.T, e *clitest.Env, g *clitest.LibvirtGuest, dir string) {
	t.Helper()
	state := filepath.Join(e.Dir, "state")
	sourceLog := filepath.Join(g.D.Dir, "vm", "console.log")
	sourceState := strings.TrimSpace(g.Virsh("domstate", "web-1"))
	logBefore, err := os.Stat(sourceLog)
	if err != nil {
		t.Fatal(err)
	}
	before := treeOf(t, dir)
	nothingLeft := func(when string) {
		t.Helper()
		if names := testCopies(g); len(names) != 0 {
			t.Fatalf("%s: test copies still run: %v", when, names)
		}
		for _, pattern := range []string{filepath.Join(dir, ".test-failover-*"), filepath.Join(state, "failover-tests", "*")} {
			if left, _ := filepath.Glob(pattern); len(left) != 0 {
				t.Fatalf("%s: left behind: %v", when, left)
			}
		}
		if after := treeOf(t, dir); after != before {
			t.Fatalf("%s: the standby changed:\n%s\nnow:\n%s", when, before, after)
		}
	}

	// Killed mid-test: its copy outlives it, the next server ends it.
	drill := e.Child("failover", "test", "drill")
	var exit *exec.ExitError
	if err := drill.Run(); !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the test failover its script kills: %v", err)
	}
	if names := testCopies(g); len(names) != 1 {
		t.Fatalf("the killed test failover's copy does not run (%v): the test proves nothing", names)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".test-failover-*", "*.qcow2")); len(left) == 0 {
		t.Fatal("the killed test failover left no overlay: the test proves nothing")
	}
	srv := e.StartServer()
	if !strings.Contains(srv.Log(), "removed the leftover of a killed test failover") {
		t.Fatalf("the server's log does not say what it removed:\n%s", srv.Log())
	}
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}
	nothingLeft("after the server's start")

	var run api.FailoverRun
	if err := json.Unmarshal([]byte(e.Must("failover", "test", "rehearse", "--json")), &run); err != nil {
		t.Fatal(err)
	}
	steps := map[string]api.FailoverStep{}
	for _, st := range run.Steps {
		if st.Error != "" {
			t.Fatalf("step %+v", st)
		}
		steps[st.Name] = st
	}
	if !run.Passed || !strings.Contains(steps["start"].Detail, "as coffer-test-") ||
		!strings.Contains(steps["script"].Detail, "web-1 checked its blocks in "+dir+"/.test-failover-") || steps["discard"].Name == "" {
		t.Fatalf("the test failover: %+v", run)
	}
	t.Logf("test failover of the standby domain: start %.1fs, script %.1fs, discard %.1fs, whole %.1fs",
		steps["start"].Seconds, steps["script"].Seconds, steps["discard"].Seconds, run.Seconds)
	nothingLeft("after the test failover")
	if st := strings.TrimSpace(g.Virsh("domstate", "web-1")); st != sourceState {
		t.Fatalf("the source went from %s to %s", sourceState, st)
	}
	if fi, err := os.Stat(sourceLog); err != nil || fi.Size() != logBefore.Size() || !fi.ModTime().Equal(logBefore.ModTime()) {
		t.Fatalf("the source's console log was written: %v", err)
	}
}

// testCopies lists the domains of the daemon whose name is a test copy's.
func testCopies(g *clitest.LibvirtGuest) []string {
	var out []string
	for _, n := range strings.Fields(g.Virsh("list", "--all", "--name")) {
		if strings.HasPrefix(n, "coffer-test-") {
			out = append(out, n)
		}
	}
	return out
}
