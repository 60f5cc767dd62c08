// Package tasks measures how long an event of a task takes from being
// recorded (Handle.Log) to reaching a subscriber, in the same process and
// in another one, on SQLite (other processes poll) and PostgreSQL (other
// processes are notified through LISTEN/NOTIFY):
//
//	go test -run '^$' -bench EventDelay -benchtime 1x ./bench/tasks/
//
// Each case logs one line at a time and waits for the subscriber to get it
// before logging the next, so the figures are latencies, not queueing. In
// another process the line carries its time of recording (same host, same
// clock), and lines are recorded at random moments (up to a poll interval
// apart), so that a polling reader is caught at every point of its cycle.
// The results are in docs/design/catalog.md.
package tasks

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// samples is the number of lines each case logs.
const samples = 200

// pollInterval is job.Options' default.
const pollInterval = 250 * time.Millisecond

const envWriter = "COFFER_BENCH_TASK_WRITER" // the catalog of the writer process

// TestMain turns the test binary into the writer process when asked to: it
// starts a task, prints its ID, then logs a line, stamped with the time, for
// every line read from stdin.
func TestMain(m *testing.M) {
	if loc := os.Getenv(envWriter); loc != "" {
		if err := writer(loc); err != nil {
			fmt.Fprintln(os.Stderr, "writer:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func writer(loc string) error {
	ctx := context.Background()
	cat, err := catalogopen.Open(ctx, loc)
	if err != nil {
		return err
	}
	defer cat.Close()
	m, err := job.New(ctx, cat, job.Options{PruneEvery: -1})
	if err != nil {
		return err
	}
	defer m.Close()
	h, err := m.Start(ctx, job.Spec{Kind: job.KindVerify})
	if err != nil {
		return err
	}
	fmt.Println(h.ID())
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		h.Log("info", "sample", map[string]any{"t0": strconv.FormatInt(time.Now().UnixNano(), 10)})
	}
	_, err = h.Finish(ctx, "success", "")
	return err
}

func BenchmarkEventDelay(b *testing.B) {
	dbs := []struct {
		name     string
		location func(b *testing.B) string
	}{
		{"sqlite", func(b *testing.B) string { return filepath.Join(b.TempDir(), "catalog.db") }},
		{"postgres", func(b *testing.B) string { return testutil.StartPostgres(b) }},
	}
	for _, db := range dbs {
		b.Run(db.name+"/same-process", func(b *testing.B) { sameProcess(b, db.location(b)) })
		b.Run(db.name+"/other-process", func(b *testing.B) { otherProcess(b, db.location(b)) })
	}
}

func open(b *testing.B, loc string) *job.Manager {
	ctx := context.Background()
	cat, err := catalogopen.Open(ctx, loc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cat.Close() })
	m, err := job.New(ctx, cat, job.Options{PruneEvery: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	return m
}

// nextLine waits for the next log line on s.
func nextLine(b *testing.B, s *job.Subscription) job.Line {
	for {
		select {
		case ev, ok := <-s.C:
			if !ok {
				b.Fatalf("subscription ended: %v", s.Err())
			}
			if ev.Type == job.EventLog {
				return ev.Line
			}
		case <-time.After(time.Minute):
			b.Fatal("no line within a minute")
		}
	}
}

func sameProcess(b *testing.B, loc string) {
	ctx := context.Background()
	m := open(b, loc)
	for b.Loop() {
		h, err := m.Start(ctx, job.Spec{Kind: job.KindVerify})
		if err != nil {
			b.Fatal(err)
		}
		s, err := m.Subscribe(ctx, h.ID(), 0)
		if err != nil {
			b.Fatal(err)
		}
		delays := make([]time.Duration, samples)
		for i := range delays {
			t0 := time.Now()
			h.Log("info", "sample", nil)
			nextLine(b, s)
			delays[i] = time.Since(t0)
		}
		if _, err := h.Finish(ctx, "success", ""); err != nil {
			b.Fatal(err)
		}
		report(b, delays)
	}
}

func otherProcess(b *testing.B, loc string) {
	ctx := context.Background()
	m := open(b, loc) // migrates the catalog before the writer opens it
	for b.Loop() {
		cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
		cmd.Env = append(os.Environ(), envWriter+"="+loc)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			b.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			b.Fatalf("writer printed no task ID: %v", err)
		}
		id, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		s, err := m.Subscribe(ctx, id, 0)
		if err != nil {
			b.Fatal(err)
		}
		delays := make([]time.Duration, samples)
		for i := range delays {
			time.Sleep(rand.N(pollInterval)) // pacing: a random phase of the reader's poll
			if _, err := fmt.Fprintln(stdin, "next"); err != nil {
				b.Fatal(err)
			}
			l := nextLine(b, s)
			t0, err := strconv.ParseInt(fmt.Sprint(l.Fields["t0"]), 10, 64)
			if err != nil {
				b.Fatalf("line without its time: %+v", l)
			}
			delays[i] = time.Since(time.Unix(0, t0))
		}
		_ = stdin.Close()
		if err := cmd.Wait(); err != nil {
			b.Fatal(err)
		}
		report(b, delays)
	}
}

func report(b *testing.B, delays []time.Duration) {
	slices.Sort(delays)
	ms := func(q float64) float64 {
		return float64(delays[int(q*float64(len(delays)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(ms(0.5), "p50-ms")
	b.ReportMetric(ms(0.9), "p90-ms")
	b.ReportMetric(ms(0.99), "p99-ms")
	b.ReportMetric(ms(1), "max-ms")
	b.ReportMetric(0, "ns/op")
}
