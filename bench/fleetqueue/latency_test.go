// Package fleetqueue measures the fleet's hand-off (internal/fleet/queue)
// on a real PostgreSQL: how long an admitted unit takes from its insert
// to the start of its operation on the worker (admission-to-start), and
// to its outcome back at the submitter (round trip):
//
//	go test -run '^$' -bench AdmissionToStart -benchtime 1x ./bench/fleetqueue/
//
// One server client submits no-op operations to one worker client, one at
// a time, each after a random pause (up to 50 ms, so that submissions
// fall anywhere in the worker's fetch cycle), and waits for its start and
// its outcome before the next: the figures are latencies, not queueing.
// Both clients are in this process (one clock) with pools of their own.
// The results are in docs/benchmarks-fleet.md.
package fleetqueue

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coffer-backup/coffer/internal/fleet/queue"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// samples is the number of hand-offs measured.
const samples = 300

type noopInput struct {
	Body struct {
		N int `json:"n"`
	}
}

// started receives the time each no-op operation starts on the worker.
var started = make(chan time.Time, 1)

// noop is the benchmark's operation: it only says when it started.
var noop = service.Operation{ID: "bench-noop", Method: "Noop", HTTP: service.Post, Path: "/bench/noop",
	Endpoint: service.Endpoint[noopInput, service.Result[int]](
		func(_ context.Context, _ *service.Service, in *noopInput) (*service.Result[int], error) {
			started <- time.Now()
			return &service.Result[int]{Body: in.Body.N}, nil
		}),
}

func BenchmarkAdmissionToStart(b *testing.B) {
	dsn := testutil.StartPostgres(b)
	ctx := context.Background()
	pool := func() *pgxpool.Pool {
		p, err := pgxpool.New(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(p.Close)
		return p
	}
	srvPool, workerPool := pool(), pool()
	if _, err := queue.Migrate(ctx, srvPool); err != nil {
		b.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	svc := service.New(service.Config{StateDir: b.TempDir(), Local: true, Operations: []service.Operation{noop}, Logger: logger})
	worker, err := queue.NewWorker(workerPool, queue.Config{Name: "bench", Epoch: 1, Slots: 1, Service: svc, Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	srv, err := queue.NewServer(srvPool, queue.Config{Service: svc, Logger: logger})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []*queue.Client{worker, srv} {
		if err := c.Start(ctx); err != nil {
			b.Fatal(err)
		}
		defer func() { _ = c.Stop(ctx) }()
	}
	for b.Loop() {
		var toStart, roundTrip []time.Duration
		for i := range samples {
			time.Sleep(rand.N(50 * time.Millisecond))
			in := &noopInput{}
			in.Body.N = i
			t0 := time.Now()
			s, err := srv.Submit(ctx, queue.Unit{Worker: "bench", Epoch: 1, Operation: noop.ID, Input: in})
			if err != nil {
				b.Fatal(err)
			}
			toStart = append(toStart, (<-started).Sub(t0))
			o, err := srv.Wait(ctx, s.ID)
			if err != nil || o.Err() != nil {
				b.Fatalf("hand-off %d: %v, %v", s.ID, err, o.Err())
			}
			roundTrip = append(roundTrip, time.Since(t0))
		}
		report(b, "insert-to-start", toStart)
		report(b, "insert-to-outcome", roundTrip)
	}
}

func report(b *testing.B, name string, d []time.Duration) {
	slices.Sort(d)
	q := func(p float64) time.Duration { return d[int(p*float64(len(d)-1))] }
	fmt.Printf("%-18s n=%d p50=%v p90=%v p99=%v max=%v\n", name, len(d), q(0.50), q(0.90), q(0.99), d[len(d)-1])
	b.ReportMetric(float64(q(0.50).Microseconds())/1000, name+"-p50-ms")
	b.ReportMetric(float64(q(0.99).Microseconds())/1000, name+"-p99-ms")
}
