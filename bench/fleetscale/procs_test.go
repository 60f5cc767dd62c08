package fleetscale

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coffer-backup/coffer/bench/fleetserver"
	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/server"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// asCoffer is the environment that makes this benchmark's binary run as
// coffer (clitest.Main), with the simulated fleet registered.
const asCoffer = "COFFER_TEST_AS_CLI=1"

// coffer runs a coffer command of the installation to its end and
// returns its stdout.
func coffer(b *testing.B, env []string, args ...string) string {
	b.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), asCoffer), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		b.Fatalf("coffer %v: %v\n%s%s", args, err, out.String(), errOut.String())
	}
	return out.String()
}

// proc is a coffer process the benchmark started (a worker).
type proc struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	log  bytes.Buffer
	done chan error
}

// startProc starts coffer with args and waits until its log holds
// ready.
func startProc(b *testing.B, env []string, ready string, args ...string) *proc {
	b.Helper()
	p := &proc{cmd: exec.Command(os.Args[0], args...), done: make(chan error, 1)}
	p.cmd.Env = append(append(os.Environ(), asCoffer), env...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	pipe, err := p.cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pipe)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		p.done <- p.cmd.Wait()
	}()
	b.Cleanup(p.stop)
	waitFor(b, "coffer "+args[0]+" ready", p.Log, ready)
	return p
}

// Log is what the process wrote to its standard error so far.
func (p *proc) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
	}
}

// waitFor polls log until it holds want; a minute bounds the wait.
func waitFor(b *testing.B, what string, log func() string, want string) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(log(), want) {
		if time.Now().After(deadline) {
			b.Fatalf("%s: not within a minute:\n%s", what, log())
		}
		time.Sleep(50 * time.Millisecond) // a poll's pace, not a synchronisation
	}
}

// runPolicy runs a policy through the server's API and returns its job
// and the wall time from the request to the answer.
func runPolicy(b *testing.B, srv *fleetserver.Server, token, policy string) (api.Job, time.Duration) {
	b.Helper()
	req, err := http.NewRequest("POST", srv.URL+server.Prefix+"/policies/"+policy+"/run?wait=true", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	start := time.Now()
	res, err := fleetserver.Client.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	took := time.Since(start)
	body, _ := io.ReadAll(res.Body)
	var j api.Job
	if err := json.Unmarshal(body, &j); err != nil || j.Status != "success" {
		b.Fatalf("run %s: %d %v: %s\n%s", policy, res.StatusCode, err, body, srv.Log())
	}
	return j, took
}

// cpuSeconds is a process's user and system time so far (/proc/PID/stat,
// in clock ticks of 1/100 s, Linux's USER_HZ).
func cpuSeconds(b *testing.B, pid int, thread ...int) float64 {
	b.Helper()
	path := fmt.Sprintf("/proc/%d/stat", pid)
	if len(thread) > 0 { // one thread's (/proc/PID/task/TID/stat)
		path = fmt.Sprintf("/proc/%d/task/%d/stat", pid, thread[0])
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	// The command name, in parentheses, may hold spaces: count the
	// fields after it (utime and stime are fields 14 and 15).
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

// monitorThreadCPU is the CPU time so far of the Go runtime's system
// monitor (sysmon) in process pid: the runtime starts it as the process's
// first thread after the main one, so it is the second lowest thread ID.
// It runs without a P, so CPU profiles never sample it, yet it polls
// every 20 µs or more while any goroutine runs or is in a system call.
func monitorThreadCPU(b *testing.B, pid int) float64 {
	b.Helper()
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		b.Fatal(err)
	}
	var tids []int
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			tids = append(tids, tid)
		}
	}
	if len(tids) < 2 {
		return 0
	}
	slices.Sort(tids)
	return cpuSeconds(b, pid, tids[1])
}

// postgresCPU is the CPU time of PostgreSQL's postmaster and its
// backends (its children) so far.
func postgresCPU(b *testing.B, postmaster int) float64 {
	b.Helper()
	total := cpuSeconds(b, postmaster)
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, d := range dirs {
		raw, err := os.ReadFile(d)
		if err != nil {
			continue // ended meanwhile
		}
		f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+2:]))
		if ppid, _ := strconv.Atoi(f[1]); ppid == postmaster {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
			total += cpuSeconds(b, pid)
		}
	}
	return total
}

// startPostgres starts PostgreSQL with pg_stat_statements preloaded:
// testutil launches it on a kept directory, which is then relaunched
// once the preload is set (it needs a restart). It returns the DSN and
// the postmaster's process ID.
func startPostgres(b *testing.B) (string, int) {
	b.Helper()
	bin := testutil.PostgresBinDir(b)
	dir, err := os.MkdirTemp("/tmp", "coffer-bench-fleetscale-") // as root, PostgreSQL runs as postgres: not under $HOME
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	dsn, stop, err := testutil.LaunchPostgres(bin, dir)
	if err != nil {
		b.Fatal(err)
	}
	exec1(b, dsn, "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
	stop()
	dsn, stop, err = testutil.LaunchPostgres(bin, dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(stop)
	exec1(b, dsn, "CREATE EXTENSION pg_stat_statements")
	pidLine, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
	if err != nil {
		b.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(pidLine), "\n", 2)[0]))
	return dsn, pid
}

func exec1(b *testing.B, dsn, sql string) {
	b.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql); err != nil {
		b.Fatalf("%s: %v", sql, err)
	}
}

// statements is what pg_stat_statements counted since its last reset:
// the statements executed, and the most frequent ones.
type statements struct {
	calls int64
	top   []string
}

func resetStatements(b *testing.B, dsn string) { exec1(b, dsn, "SELECT pg_stat_statements_reset()") }

func readStatements(b *testing.B, dsn string) statements {
	b.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var s statements
	if err := conn.QueryRow(ctx, "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_statements").Scan(&s.calls); err != nil {
		b.Fatal(err)
	}
	rows, err := conn.Query(ctx, "SELECT calls, left(regexp_replace(query, '\\s+', ' ', 'g'), 110) FROM pg_stat_statements ORDER BY calls DESC LIMIT 30")
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var n int64
		var q string
		if err := rows.Scan(&n, &q); err != nil {
			b.Fatal(err)
		}
		s.top = append(s.top, fmt.Sprintf("%7d  %s", n, q))
	}
	return s
}

// workerLogin is the flags that log worker name in with a token of its
// own (made with coffer workers token create, as on a server's host) to
// the catalog at dsn, given without its credentials.
func workerLogin(b *testing.B, env []string, dir, dsn, name string) []string {
	b.Helper()
	file := filepath.Join(dir, name+".token")
	if err := os.WriteFile(file, []byte(coffer(b, env, "workers", "token", "create", name)), 0o600); err != nil {
		b.Fatal(err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		b.Fatal(err)
	}
	u.User = nil
	return []string{"--catalog", u.String(), "--token-file", file}
}
