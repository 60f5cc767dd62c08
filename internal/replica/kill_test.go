package replica

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/nbd/qemunbd"

	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
)

const helperEnv = "COFFER_TEST_REPLICA_HELPER" // repo dir|standby dir|point|stage|marker

// killStages are the windows of a run: overlays being written, written but
// not recorded, and each step of the merge that prunes the oldest point.
var killStages = []string{"overlay-created", "span-written", "written", "merge-noted", "merge-committed", "merge-renamed"}

// TestKilledReplicationKeepsTheLastPoint kills a replicating process with
// SIGKILL in each window of a run, and then at random instants: after
// every kill, each recorded point still equals its backup point's image
// (the standby is at its last complete point, or at the new one when the
// kill came after the record), and the next run recovers, leaves no file
// the record does not name, and reaches the new point.
func TestKilledReplicationKeepsTheLastPoint(t *testing.T) {
	requireQemu(t)
	ctx := context.Background()
	l := repotest.NewLocal(t, repo.InitOptions{ChunkSize: testChunk})
	s := newSource(t)
	dir := filepath.Join(t.TempDir(), "standby")
	o := Options{Dir: dir, Keep: 2}
	for range 2 {
		s.change(t)
		if _, err := Run(ctx, l.R, s.backup(t, l.R), o); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	kills := append(append([]string{}, killStages...), "random", "random", "random", "random", "random", "random")
	for _, stage := range kills {
		s.change(t)
		p := s.backup(t, l.R)
		before, err := LoadState(dir)
		if err != nil {
			t.Fatal(err)
		}
		killHelper(t, l.Dir, dir, p.ID.String(), stage, rng)
		// The killed process's qemu-img and qemu-nbd die with it
		// (Pdeathsig), an instant after it: none may wait on.
		awaitNoServer(t, dir, stage)
		files, _ := filepath.Glob(filepath.Join(dir, "disk-*.qcow2"))
		if err := awaitQuiet(ctx, files, time.Minute); err != nil {
			t.Fatal(err)
		}
		st := checkPoints(t, dir, s)
		if n := st.Newest().BackupPoint; stage != "random" && n != before.Newest().BackupPoint && n != p.ID.String() {
			t.Fatalf("killed at %s: newest point %s is neither the previous nor the new one", stage, n)
		}
		committed := st.Newest().BackupPoint == p.ID.String()
		if strings.HasPrefix(stage, "merge") != committed && stage != "random" {
			t.Fatalf("killed at %s: committed %v", stage, committed)
		}
		res, err := Run(ctx, l.Reopen(t), p, o)
		if err != nil {
			t.Fatalf("run after the kill at %s: %v", stage, err)
		}
		if res.Point.BackupPoint != p.ID.String() {
			t.Fatalf("after the kill at %s: %+v", stage, res.Point)
		}
		st = checkPoints(t, dir, s)
		if len(st.Points) != 2 || st.Merge != nil {
			t.Fatalf("after the kill at %s: %d points, merge %v", stage, len(st.Points), st.Merge)
		}
		checkOnlyRecorded(t, dir, st)
		awaitNoServer(t, dir, stage)
	}
}

// awaitNoServer waits until no qemu-nbd serves a file of dir, and fails
// when one still does after a minute: a killed run must not leave one
// holding the standby's files.
func awaitNoServer(t *testing.T, dir, stage string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		pids := qemunbd.Serving(dir)
		if len(pids) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the kill at %s: qemu-nbd %v still serves a file of %s", stage, pids, dir)
		}
		time.Sleep(10 * time.Millisecond) // a poll's pace for a process's exit, not a synchronisation
	}
}

// killHelper runs a replication in a process of its own and kills it at
// stage (when it reports reaching it) or, for "random", after a random
// part of a run's time.
func killHelper(t *testing.T, repoDir, dir, point, stage string, rng *rand.Rand) {
	t.Helper()
	marker := filepath.Join(t.TempDir(), "reached")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperReplicaRun$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+strings.Join([]string{repoDir, dir, point, stage, marker}, "|"))
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var at <-chan time.Time
	if stage == "random" {
		at = time.After(time.Duration(rng.IntN(400)) * time.Millisecond) // a kill at any instant
	}
	deadline := time.After(2 * time.Minute)
	for reached := false; !reached; {
		select {
		case err := <-exited:
			if stage == "random" {
				return // finished before the kill: a complete run
			}
			t.Fatalf("helper exited before %s: %v\n%s", stage, err, out)
		case <-at:
			reached = true
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("helper did not reach %s\n%s", stage, out)
		case <-time.After(5 * time.Millisecond): // polling interval for the marker
			_, err := os.Stat(marker)
			reached = err == nil
		}
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
}

// TestHelperReplicaRun is the process TestKilledReplicationKeepsTheLastPoint kills.
func TestHelperReplicaRun(t *testing.T) {
	args := strings.Split(os.Getenv(helperEnv), "|")
	if len(args) != 5 {
		t.Skip("helper process of TestKilledReplicationKeepsTheLastPoint")
	}
	repoDir, dir, point, stage, marker := args[0], args[1], args[2], args[3], args[4]
	r := (&repotest.Local{Dir: repoDir}).Reopen(t)
	p, err := r.FindPoint(context.Background(), point)
	if err != nil {
		t.Fatal(err)
	}
	hook := func(s string) {
		if s == stage {
			if err := os.WriteFile(marker, nil, 0o600); err != nil {
				panic(err)
			}
			select {} // killed here
		}
	}
	_, err = Run(context.Background(), r, p, Options{Dir: dir, Keep: 2, hook: hook})
	fmt.Println("run ended:", err)
}
