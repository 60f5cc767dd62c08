package queue_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coffer-backup/coffer/internal/fleet/queue"
)

// A worker process is this test binary run as TestWorkerProcess with
// these variables set: a real process the test can kill -9.
const (
	envDSN   = "COFFER_QUEUE_TEST_DSN"
	envEpoch = "COFFER_QUEUE_TEST_EPOCH"
	envDir   = "COFFER_QUEUE_TEST_DIR"
)

func inWorkerProcess() bool { return os.Getenv(envDSN) != "" }

// TestWorkerProcess is worker k in a process of its own (only when
// started by startWorkerProcess): it works its queue until killed.
func TestWorkerProcess(t *testing.T) {
	if !inWorkerProcess() {
		t.Skip("run by TestWorkerKilledMidOperation as a worker process")
	}
	epoch, _ := strconv.ParseInt(os.Getenv(envEpoch), 10, 64)
	pool, err := pgxpool.New(context.Background(), os.Getenv(envDSN))
	if err != nil {
		t.Fatal(err)
	}
	c, err := queue.NewWorker(pool, queue.Config{Name: "k", ID: fmt.Sprintf("worker-k-%d", epoch), Epoch: epoch, Slots: 1,
		Service: workerService(t, os.Getenv(envDir)), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	select {}
}

type workerProcess struct {
	cmd   *exec.Cmd
	lines *bufio.Scanner
}

func startWorkerProcess(t *testing.T, dsn string, epoch int) *workerProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestWorkerProcess$", "-test.v")
	cmd.Env = append(os.Environ(), envDSN+"="+dsn, envEpoch+"="+strconv.Itoa(epoch), envDir+"="+t.TempDir())
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return startProcess(t, cmd)
}

// startProcess starts a worker process and waits for its "ready"; it is
// killed when the test ends.
func startProcess(t *testing.T, cmd *exec.Cmd) *workerProcess {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &workerProcess{cmd: cmd, lines: bufio.NewScanner(out)}
	t.Cleanup(p.kill)
	p.expect(t, "ready")
	return p
}

// expect reads the process's output up to a line that is want.
func (p *workerProcess) expect(t *testing.T, want string) {
	t.Helper()
	for p.lines.Scan() {
		if strings.TrimSpace(p.lines.Text()) == want {
			return
		}
	}
	t.Fatalf("the worker process ended before saying %q: %v", want, p.lines.Err())
}

func (p *workerProcess) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	}
}

// TestWorkerKilledMidOperation: kill -9 of a worker mid-operation leaves
// its River job running (River's rescuer would discard it after
// RescueStuckJobsAfter; coffer's registry declares the worker lost long
// before). Its replacement, at a new epoch, does not run that job (River
// fetches only available jobs), the engine's next attempt runs on it,
// and a replayed insert of the lost attempt stays one job.
func TestWorkerKilledMidOperation(t *testing.T) {
	pool, dsn := startCatalog(t)
	srv := startServer(t, pool)
	ctx := context.Background()
	in := &sleepInput{}
	in.Body.Tag, in.Body.Seconds = "lost", 3600
	lost := queue.Unit{Worker: "k", Epoch: 1, Operation: "test-sleep", Input: in, Job: 11, Task: 1, Attempt: 1}

	first := startWorkerProcess(t, dsn, 1)
	s, err := srv.Submit(ctx, lost)
	if err != nil {
		t.Fatal(err)
	}
	first.expect(t, "started lost")
	first.kill()

	var state string
	var attempt int
	var by []string
	if err := pool.QueryRow(ctx, `SELECT state, attempt, attempted_by FROM river.river_job WHERE id = $1`, s.ID).Scan(&state, &attempt, &by); err != nil {
		t.Fatal(err)
	}
	if state != "running" || attempt != 1 || len(by) != 1 || by[0] != "worker-k-1" {
		t.Fatalf("the killed worker's job: %s, attempt %d, by %v", state, attempt, by)
	}

	second := startWorkerProcess(t, dsn, 2)
	if again, err := srv.Submit(ctx, lost); err != nil || !again.Duplicate {
		t.Fatalf("a replayed insert of the lost attempt: %+v, %v", again, err)
	}
	retry := lost
	retry.Epoch, retry.Attempt = 2, 2
	in.Body.Tag, in.Body.Seconds = "retry", 0
	r, err := srv.Submit(ctx, retry)
	if err != nil {
		t.Fatal(err)
	}
	second.expect(t, "started retry")
	if o := waitOutcome(t, srv, r.ID, 30*time.Second); o.Err() != nil || o.Worker != "k" {
		t.Fatalf("the retry: %+v", o)
	}
	if err := pool.QueryRow(ctx, `SELECT state FROM river.river_job WHERE id = $1`, s.ID).Scan(&state); err != nil || state != "running" {
		t.Fatalf("the lost attempt's job after the retry: %s, %v", state, err)
	}
}
