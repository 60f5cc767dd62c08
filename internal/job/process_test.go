package job_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// The helper process (this test binary, re-run by TestMain) starts a task
// on the catalog named by envHelper, prints its ID, and then, by envMode,
// waits to be cancelled and ends the task ("cancel"), or waits to be killed
// ("hang").
const (
	envHelper = "COFFER_TEST_TASK_HELPER"
	envMode   = "COFFER_TEST_TASK_MODE"
)

// helperWait bounds the helper's life should its parent never act.
const helperWait = 2 * time.Minute

func helperMain() int {
	ctx := context.Background()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 2
	}
	cat, err := catalogopen.Open(ctx, os.Getenv(envHelper))
	if err != nil {
		return fail(err)
	}
	defer cat.Close()
	m, err := job.New(ctx, cat, job.Options{PollInterval: 10 * time.Millisecond, PruneEvery: -1})
	if err != nil {
		return fail(err)
	}
	defer m.Close()
	h, err := m.Start(ctx, job.Spec{Kind: job.KindVerify, Object: "/repositories/main"})
	if err != nil {
		return fail(err)
	}
	h.Log("info", "started in process "+strconv.Itoa(os.Getpid()), nil)
	if err := h.Flush(ctx); err != nil {
		return fail(err)
	}
	fmt.Println(h.ID())
	select {
	case <-h.Context().Done():
	case <-time.After(helperWait):
		return fail(fmt.Errorf("not cancelled within %s", helperWait))
	}
	if os.Getenv(envMode) != "cancel" {
		return fail(fmt.Errorf("mode %q", os.Getenv(envMode)))
	}
	cause := context.Cause(h.Context())
	if _, err := h.End(ctx, cause); err != nil {
		return fail(err)
	}
	fmt.Println("ended:", cause)
	return 0
}

type helper struct {
	cmd  *exec.Cmd
	id   int64
	out  *bufio.Reader
	done chan error
}

func startHelper(t *testing.T, loc, mode string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelper+"="+loc, envMode+"="+mode)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	pipe, err := cmd.StdoutPipe()
	ok(t, err)
	ok(t, cmd.Start())
	h := &helper{cmd: cmd, out: bufio.NewReader(pipe), done: make(chan error, 1)}
	line, err := h.out.ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("helper printed no task ID (%v): %s", err, stderr.String())
	}
	h.id, err = strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	ok(t, err)
	go func() {
		rest, _ := io.ReadAll(h.out)
		err := cmd.Wait()
		if err != nil {
			err = fmt.Errorf("%w: %s%s", err, rest, stderr.String())
		} else {
			h.out = bufio.NewReader(strings.NewReader(string(rest)))
		}
		h.done <- err
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return h
}

// locations are the catalogs the process tests share between processes: a
// SQLite file, and a PostgreSQL database on a server the test starts.
func locations() map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"sqlite": func(t *testing.T) string { return filepath.Join(t.TempDir(), "catalog.db") },
		"postgres": func(t *testing.T) string {
			server := testutil.StartPostgres(t)
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, server)
			ok(t, err)
			defer conn.Close(ctx)
			_, err = conn.Exec(ctx, "CREATE DATABASE tasks")
			ok(t, err)
			return strings.Replace(server, "/postgres?", "/tasks?", 1)
		},
	}
}

func openLocation(t *testing.T, loc string) catalog.Catalog {
	t.Helper()
	c, err := catalogopen.Open(context.Background(), loc)
	ok(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// A task running in one process is cancelled from another: the flag in
// the catalog reaches the running process (notified on PostgreSQL, polled
// on SQLite), which cancels the task's context and ends it; the process
// that cancelled follows it to its end.
func TestCancelAcrossProcesses(t *testing.T) {
	for name, newLocation := range locations() {
		t.Run(name, func(t *testing.T) {
			loc := newLocation(t)
			// The catalog exists (and is migrated) before the helper runs.
			m := newManager(t, openLocation(t, loc), job.Options{})
			h := startHelper(t, loc, "cancel")
			ctx := context.Background()
			s := must[*job.Subscription](t)(m.Subscribe(ctx, h.id, 0))
			same(t, "first event", describe(next(t, s)), "status running")
			if ev := next(t, s); ev.Type != job.EventLog || !strings.HasPrefix(ev.Line.Message, "started in process") {
				t.Fatalf("second event %+v", ev)
			}
			must[job.Record](t)(m.Cancel(ctx, h.id, "tester"))
			select {
			case err := <-h.done:
				ok(t, err)
			case <-time.After(eventWait):
				t.Fatalf("the helper did not end its task within %s of the cancel", eventWait)
			}
			out, _ := io.ReadAll(h.out)
			if !strings.Contains(string(out), "ended: "+job.ErrCancelled.Error()) {
				t.Fatalf("helper's task context ended by: %q", out)
			}
			var seen []string
			for ev := range s.C {
				if d := describe(ev); d != "status running (cancel requested)" {
					seen = append(seen, d)
				}
			}
			ok(t, s.Err())
			same(t, "events after the cancel", seen, []string{"log 2:cancel requested by tester", "status cancelled"})
			got := must[job.Record](t)(m.Get(ctx, h.id))
			if got.Status != catalog.StatusCancelled || got.Owner.PID != h.cmd.Process.Pid {
				t.Fatalf("task after the cancel: %+v", got)
			}
		})
	}
}

// A task whose process is killed is marked failed, interrupted, when a
// coffer process starts next on that host.
func TestTaskOfAKilledProcessIsInterrupted(t *testing.T) {
	for name, newLocation := range locations() {
		t.Run(name, func(t *testing.T) {
			loc := newLocation(t)
			h := startHelper(t, loc, "hang")
			cat := openLocation(t, loc)
			ctx := context.Background()
			if got := must[job.Record](t)(cat.GetJob(ctx, h.id)); got.Status != catalog.StatusRunning {
				t.Fatalf("task of the live helper: %+v", got)
			}
			ok(t, h.cmd.Process.Kill())
			<-h.done
			m := newManager(t, cat, job.Options{})
			got := must[job.Record](t)(m.Get(ctx, h.id))
			want := fmt.Sprintf("interrupted: the coffer process that ran it (pid %d on %s) is gone", h.cmd.Process.Pid, m.Owner().Host)
			if got.Status != catalog.StatusFailed || got.Error != want || got.FinishedAt.IsZero() {
				t.Fatalf("task of the killed helper: %s %q, want failed %q", got.Status, got.Error, want)
			}
			lines := must[[]job.Line](t)(m.Log(ctx, h.id, 0, 0))
			if len(lines) != 2 || lines[1].Message != want {
				t.Fatalf("log: %v", messages(lines))
			}
		})
	}
}
