package replicacmd_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestKilledServerMidTestFailoverLeavesNothing: a server killed with
// SIGKILL while its test failover's VM runs (a probe that cannot pass
// keeps it running) leaves that QEMU running on its overlay. The next
// server start, before it serves, stops it and removes the run's
// directory: no QEMU of the state directory runs any more (its isolated
// network was QEMU's own), no overlay is left, and the standby is as
// before. The run's job, read back through failover-plan-runs, is marked
// failed and holds the start step its events recorded before the kill.
// While the test ran, a replication of its standby and a second test of
// it were refused, saying why (refusedWhileTesting); the kill released
// the test's lock, so replication runs again.
func TestKilledServerMidTestFailoverLeavesNothing(t *testing.T) {
	testutil.RequireBinary(t, "qemu-img")
	testutil.RequireBinary(t, "qemu-nbd")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	e := clitest.NewEnv(t)
	vm := clitest.StartBootGuest(ctx, t, e)
	// A short state directory: the test's QEMU sockets live in it, and
	// a socket's path has at most 107 bytes (t.TempDir's are long).
	short, err := os.MkdirTemp("", "cf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(short) })
	e.Vars["COFFER_STATE_DIR"] = short
	e.Must("init")
	standbys := filepath.Join(e.Dir, "dr")
	e.Config(`connections:
  - {name: dr, kind: qemu, options: {sockets: ["` + e.Dir + `/none/*.qmp"]}}
replications:
  - {name: web-dr, vms: [web-1], connection: dr, directory: ` + standbys + `, keep: 2}
failover-plans:
  - name: shop
    replication: web-dr
    groups:
      - vms: [{name: web-1}]
        probes: ["tcp:9"]
        probe-timeout: 1h
`)
	e.Must("backup", "vm", vm.QMPPath)
	vm.Kill()
	e.Must("replicas", "run", "web-dr")
	before := treeOf(t, standbys)
	state := e.Vars["COFFER_STATE_DIR"]

	s := e.StartServer()
	tok := e.AdminToken()
	answered := make(chan string, 1)
	go func() {
		// Its answer never comes unless the run ends (or is refused)
		// before the kill.
		req, _ := http.NewRequest("POST", s.URL+"/api/v1/failover-plans/shop/test", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		res, err := s.Client().Do(req)
		if err == nil {
			b, _ := io.ReadAll(res.Body)
			_ = res.Body.Close()
			answered <- fmt.Sprintf("%d %s", res.StatusCode, b)
		}
	}()
	var runs api.FailoverPlanRuns
	for len(runs.Runs) == 0 || len(runs.Runs[0].Steps) == 0 {
		select {
		case a := <-answered:
			t.Fatalf("the test failover answered before the kill: %s", a)
		case <-ctx.Done():
			t.Fatalf("the test failover's start step never came: %+v\n%s", runs, s.Log())
		case <-time.After(200 * time.Millisecond): // polling the API: the run's events have no push to the test
		}
		s.Call(tok, "GET", "/failover-plans/shop/runs", nil, &runs)
	}
	if st := runs.Runs[0].Steps[0]; st.Name != "start" || st.Error != "" {
		t.Fatalf("the run's first step: %+v", st)
	}
	pids := qemusOf(t, state)
	if len(pids) != 1 {
		t.Fatalf("QEMU processes of the state directory while the test runs: %v", pids)
	}
	refusedWhileTesting(ctx, t, e)
	_ = s.Cmd.Process.Kill()
	<-s.Done
	if len(qemusOf(t, state)) != 1 {
		t.Fatal("the test failover's QEMU did not outlive its server: the test proves nothing")
	}
	if left, _ := filepath.Glob(filepath.Join(state, "failover-tests", "*", "*", "*.qcow2")); len(left) == 0 {
		t.Fatal("the killed test failover left no overlay: the test proves nothing")
	}

	s2 := e.StartServer()
	if p := qemusOf(t, state); len(p) != 0 {
		t.Fatalf("QEMU still runs after the next server start: %v\n%s", p, s2.Log())
	}
	if left, _ := filepath.Glob(filepath.Join(state, "failover-tests", "*")); len(left) != 0 {
		t.Fatalf("the test failover's run directory is left: %v", left)
	}
	if !strings.Contains(s2.Log(), "removed the leftover of a killed test failover") {
		t.Fatalf("the server's log does not say what it removed:\n%s", s2.Log())
	}
	if after := treeOf(t, standbys); after != before {
		t.Fatalf("the standby changed:\n%s\nnow:\n%s", before, after)
	}
	wantRunsAfterKill(t, s2, tok)
	// The kill released the test's lock on the standby: replication
	// follows the source again.
	e.Must("replicas", "run", "web-dr")
}

// wantRunsAfterKill wants the next server to list the killed test as
// failed with the start step it recorded, and the second test refused
// while it ran as failed with the reason.
func wantRunsAfterKill(t *testing.T, s *clitest.ServerProc, tok string) {
	t.Helper()
	var runs api.FailoverPlanRuns
	s.Call(tok, "GET", "/failover-plans/shop/runs", nil, &runs)
	if len(runs.Runs) != 2 || runs.Runs[1].Status != "failed" || len(runs.Runs[1].Steps) == 0 || runs.Runs[1].Steps[0].Name != "start" {
		t.Fatalf("the killed run as the next server lists it: %+v", runs.Runs)
	}
	if r := runs.Runs[0]; r.Status != "failed" || !strings.Contains(r.Error, "a test failover of this standby is already running") {
		t.Fatalf("the refused second test, as its job recorded it: %+v", r)
	}
}

// refusedWhileTesting: while a test failover runs on the standby of
// web-1, a replication of it is refused, and so is a second test
// failover, each saying why (both would otherwise go on: the run to
// merge or write points the test's VM reads, the test to start a second
// copy of it).
func refusedWhileTesting(ctx context.Context, t *testing.T, e *clitest.Env) {
	t.Helper()
	code, stdout, _ := e.Run("replicas", "run", "web-dr", "--json")
	run := clitest.Decode[api.ReplicationRun](t, stdout)
	if code == 0 || len(run.VMs) != 1 || !strings.Contains(run.VMs[0].Error, "a test failover runs on this standby's points") {
		t.Fatalf("a replication during the test failover: exit %d, %+v", code, run)
	}
	type result struct {
		code           int
		stdout, stderr string
	}
	second := make(chan result, 1)
	go func() { // bounded below: a second test that started would run until its probe's timeout
		code, stdout, stderr := e.Run("failover", "test", "shop")
		second <- result{code, stdout, stderr}
	}()
	select {
	case r := <-second:
		if r.code == 0 || r.stdout != "" || !strings.Contains(r.stderr, "the standby of web-1: ") ||
			!strings.Contains(r.stderr, "a test failover of this standby is already running") {
			t.Fatalf("a second test failover: exit %d\nstdout %s\nstderr %s", r.code, r.stdout, r.stderr)
		}
	case <-time.After(time.Minute):
		t.Fatal("a second test failover of the standby was not refused: it runs")
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
}

// qemusOf lists the live (not zombie) processes whose command line names
// dir: the QEMUs coffer started there.
func qemusOf(t *testing.T, dir string) []int {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, p := range procs {
		cmd, err := os.ReadFile(filepath.Join(p, "cmdline"))
		if err != nil || !strings.Contains(string(cmd), dir+"/") || !strings.HasPrefix(filepath.Base(strings.SplitN(string(cmd), "\x00", 2)[0]), "qemu-system") {
			continue
		}
		if st, err := os.ReadFile(filepath.Join(p, "stat")); err == nil {
			if f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:])); len(f) > 0 && f[0] == "Z" {
				continue
			}
		}
		pid, _ := strconv.Atoi(filepath.Base(p))
		out = append(out, pid)
	}
	return out
}

// treeOf lists every file under dir with its size and modification time.
func treeOf(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !fi.IsDir() && fi.Name() != "replica.lock" {
			fmt.Fprintf(&b, "%s %d %s\n", path, fi.Size(), fi.ModTime().Format(time.RFC3339Nano))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
