package replica

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
)

const testLockHelperEnv = "COFFER_TEST_TESTLOCK_HELPER" // the standby's directory

// TestTestFailoverLockExcludesReplication: while another process holds a
// test failover's lock on a standby, a replication run that would write
// a point and merge the oldest away is refused with a message that names
// the test, and leaves the standby as it was (same record, same files,
// each point still equal to its image); a second test is refused; a
// failover may still take the record's lock. Once the holder is killed
// with SIGKILL, the next run replicates. While a run holds the standby,
// a test is refused in turn.
func TestTestFailoverLockExcludesReplication(t *testing.T) {
	requireQemu(t)
	ctx := context.Background()
	r := repotest.New(t, repo.InitOptions{ChunkSize: testChunk})
	s := newSource(t)
	dir := filepath.Join(t.TempDir(), "standby")
	o := Options{Dir: dir, Keep: 1} // the next run merges the point the test reads
	if _, err := Run(ctx, r, s.backup(t, r), o); err != nil {
		t.Fatal(err)
	}
	record, err := os.ReadFile(filepath.Join(dir, stateName))
	if err != nil {
		t.Fatal(err)
	}
	holder := holdTestLock(t, dir)
	s.change(t)
	next := s.backup(t, r)
	_, err = Run(ctx, r, next, o)
	if !errors.Is(err, ErrTesting) || !strings.Contains(err.Error(), "a test failover runs on this standby's points") {
		t.Fatalf("a run while a test failover holds the standby: %v", err)
	}
	if now, _ := os.ReadFile(filepath.Join(dir, stateName)); string(now) != string(record) {
		t.Fatalf("the refused run changed the record:\n%s\nnow:\n%s", record, now)
	}
	st := checkPoints(t, dir, s)
	checkOnlyRecorded(t, dir, st)
	if l, err := LockTest(dir); !errors.Is(err, ErrTestRunning) {
		_ = closeIf(l)
		t.Fatalf("a second test failover: %v", err)
	}
	l, err := LockRun(dir)
	if err != nil {
		t.Fatalf("a failover while a test runs: %v", err)
	}
	_ = l.Close()

	_ = holder.Process.Kill() // SIGKILL: no chance to unlock
	_ = holder.Wait()
	res, err := Run(ctx, r, next, o)
	if err != nil || res.Point.BackupPoint != next.ID.String() || len(res.Pruned) != 1 {
		t.Fatalf("the run after the holder's kill: %+v %v", res, err)
	}
	checkPoints(t, dir, s)

	run, err := lockRun(dir, true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = run.Close() }()
	if l, err := LockTest(dir); !errors.Is(err, ErrReplicating) {
		_ = closeIf(l)
		t.Fatalf("a test failover while a run holds the standby: %v", err)
	}
}

func closeIf(c io.Closer) error {
	if c == nil {
		return nil
	}
	return c.Close()
}

// holdTestLock starts a process that takes a test failover's lock on dir
// and holds it until it is killed; it returns once the lock is held.
func holdTestLock(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperTestLock$", "-test.count=1")
	cmd.Env = append(os.Environ(), testLockHelperEnv+"="+dir)
	stdin, err := cmd.StdinPipe() // kept open: the helper blocks on it
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if sc.Text() == "locked" {
			go func() { _, _ = io.Copy(io.Discard, stdout) }()
			return cmd
		}
		t.Log("helper:", sc.Text())
	}
	t.Fatal("the helper ended before it held the lock")
	return nil
}

// TestHelperTestLock is the process holdTestLock starts.
func TestHelperTestLock(t *testing.T) {
	dir := os.Getenv(testLockHelperEnv)
	if dir == "" {
		t.Skip("helper process of TestTestFailoverLockExcludesReplication")
	}
	if _, err := LockTest(dir); err != nil {
		fmt.Println("lock:", err)
		return
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin) // until killed
}
