// Package takeover measures how long the scheduled jobs of a coffer
// server that dies (SIGKILL) wait for another server on the same
// PostgreSQL catalog to run them: from the kill to the start of the first
// scheduled run on the survivor, for several values of
// maintenance.takeover-after:
//
//	go test -run '^$' -bench Takeover -benchtime 1x -timeout 30m ./bench/takeover/
//
// Each case builds cmd/coffer, starts two `coffer server` processes with a
// gc scheduled every second, waits for the first to run it and the second
// to be up, kills the first and waits for the second's first run. The
// lease is renewed every third of takeover-after, so the survivor takes
// over between 2/3 and 4/3 of it after the kill, plus up to a second for
// the next slot of the schedule. The results are in docs/benchmarks.md.
package takeover

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// rounds is the number of kills per case.
const rounds = 5

func BenchmarkTakeover(b *testing.B) {
	bin := buildCoffer(b)
	dsn := testutil.StartPostgres(b)
	for _, ttl := range []time.Duration{3 * time.Second, 10 * time.Second, 30 * time.Second} {
		b.Run(fmt.Sprintf("takeover-after=%s", ttl), func(b *testing.B) {
			var got []time.Duration
			for range b.N {
				for round := range rounds {
					got = append(got, takeover(b, bin, dsn, ttl, round))
				}
			}
			slices.Sort(got)
			b.ReportMetric(got[len(got)/2].Seconds(), "s-median")
			b.ReportMetric(got[0].Seconds(), "s-min")
			b.ReportMetric(got[len(got)-1].Seconds(), "s-max")
			b.Logf("takeover-after %s: %v", ttl, got)
		})
	}
}

func buildCoffer(b *testing.B) string {
	root, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(b.TempDir(), "coffer")
	build := exec.Command("go", "build", "-o", bin, "./cmd/coffer")
	build.Dir = filepath.Dir(strings.TrimSpace(string(root)))
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build coffer: %v\n%s", err, out)
	}
	return bin
}

// server is a running `coffer server`.
type server struct {
	cmd     *exec.Cmd
	started chan struct{} // closed once it logged its start
}

func startServer(b *testing.B, bin string, env []string) *server {
	// Each on a port of its own: the servers also serve the API.
	cmd := exec.Command(bin, "server", "--log-level", "info", "--insecure-http", "--listen", "127.0.0.1:0")
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	s := &server{cmd: cmd, started: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(stderr)
		once := false
		for sc.Scan() {
			if !once && strings.Contains(sc.Text(), "coffer server started") {
				once = true
				close(s.started)
			}
		}
	}()
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return s
}

// takeover runs one round in a schema of its own and returns the time
// from the kill of the first server to the first run on the second.
func takeover(b *testing.B, bin, dsn string, ttl time.Duration, round int) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := b.TempDir()
	schema := fmt.Sprintf("takeover_%d_%d", ttl/time.Second, round)
	loc := dsn + "&search_path=" + schema
	if err := createSchema(ctx, dsn, schema); err != nil {
		b.Fatal(err)
	}
	cfg := filepath.Join(dir, "coffer.yaml")
	doc := fmt.Sprintf("maintenance:\n  takeover-after: %s\n  repositories:\n    - repository: default\n      gc: {schedule: \"@every 1s\"}\n", ttl)
	if err := os.WriteFile(cfg, []byte(doc), 0o600); err != nil {
		b.Fatal(err)
	}
	env := append(os.Environ(), "COFFER_CONFIG="+cfg, "COFFER_REPO="+filepath.Join(dir, "repo"), "COFFER_PASSWORD=pw",
		"COFFER_CATALOG="+loc, "COFFER_STATE_DIR="+filepath.Join(dir, "state"))
	init := exec.Command(bin, "init")
	init.Env = env
	if out, err := init.CombinedOutput(); err != nil {
		b.Fatalf("init: %v\n%s", err, out)
	}
	cat, err := catalogopen.Open(ctx, loc)
	if err != nil {
		b.Fatal(err)
	}
	defer cat.Close()
	a := startServer(b, bin, env)
	firstRun(ctx, b, cat, a.cmd.Process.Pid, time.Time{})
	s := startServer(b, bin, env)
	select {
	case <-s.started:
	case <-ctx.Done():
		b.Fatal("the second server did not start")
	}
	// The survivor campaigns at once and every third of ttl after: give it
	// one campaign, so that it is a follower when the kill comes, then kill
	// at a random point of the holder's renewal cycle, so that the rounds
	// see the whole range of delays rather than one phase of the cycles.
	time.Sleep(ttl/3 + rand.N(ttl/3))
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		b.Fatal(err)
	}
	killed := time.Now()
	at := firstRun(ctx, b, cat, s.cmd.Process.Pid, killed)
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	return at.Sub(killed)
}

// firstRun waits for the first task of pid created after since and
// returns its creation time.
func firstRun(ctx context.Context, b *testing.B, cat catalog.Catalog, pid int, since time.Time) time.Time {
	for {
		jobs, err := cat.ListJobs(ctx, catalog.JobFilter{Kind: catalog.KindGC, Since: since})
		if err != nil {
			b.Fatal(err)
		}
		for i := len(jobs) - 1; i >= 0; i-- { // oldest first
			if jobs[i].Owner.PID == pid {
				return jobs[i].CreatedAt
			}
		}
		select {
		case <-ctx.Done():
			b.Fatalf("no run by pid %d", pid)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func createSchema(ctx context.Context, dsn, schema string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE SCHEMA "+schema)
	return err
}
