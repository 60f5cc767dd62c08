package queue_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coffer-backup/coffer/internal/fleet/queue"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/operations"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// sleepInput is the test-only operation test-sleep's: it runs until its
// context ends or Seconds pass, after announcing Tag (on sleepStarted,
// and on stdout in a worker process), so a test knows it runs.
type sleepInput struct {
	Body struct {
		Tag     string  `json:"tag"`
		Seconds float64 `json:"seconds"`
		// Gated: it ends when sleepGate lets it, not after Seconds.
		Gated bool `json:"gated,omitempty"`
	}
}

type sleepDoc struct {
	Tag   string `json:"tag"`
	Slept bool   `json:"slept"`
}

var sleepStarted = make(chan string, 16)

// sleepGate lets a gated test-sleep end (an in-process worker's).
var sleepGate = make(chan struct{}, 1)

// quiet logs River's warnings and errors only: its per-job lines would
// drown a test's.
var quiet = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

// testOperations is the whole table, test-sleep and test-panic, which
// only this test binary registers: production has no operation that just
// waits or panics.
var testOperations = append(append([]service.Operation(nil), operations.All...), service.Operation{
	ID: "test-sleep", Method: "Sleep", Summary: "wait (tests only)", HTTP: service.Post, Path: "/test/sleep",
	Endpoint: service.Endpoint[sleepInput, service.Result[sleepDoc]](
		func(ctx context.Context, _ *service.Service, in *sleepInput) (*service.Result[sleepDoc], error) {
			if inWorkerProcess() {
				fmt.Printf("started %s\n", in.Body.Tag)
			} else {
				sleepStarted <- in.Body.Tag
			}
			var (
				gate  <-chan struct{} // nil: never
				timer <-chan time.Time
			)
			if in.Body.Gated {
				gate = sleepGate
			} else {
				timer = time.After(time.Duration(in.Body.Seconds * float64(time.Second)))
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-gate:
			case <-timer:
			}
			return &service.Result[sleepDoc]{Body: sleepDoc{Tag: in.Body.Tag, Slept: true}}, nil
		}),
}, service.Operation{
	ID: "test-panic", Method: "Panic", Summary: "panic (tests only)", HTTP: service.Post, Path: "/test/panic",
	Endpoint: service.Endpoint[struct{}, service.Result[int]](
		func(context.Context, *service.Service, *struct{}) (*service.Result[int], error) { panic("on purpose") }),
})

// startCatalog starts PostgreSQL, migrates River's schema and returns a
// pool on it.
func startCatalog(t *testing.T) (*pgxpool.Pool, string) {
	t.Helper()
	dsn := testutil.StartPostgres(t)
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	if _, err := queue.Migrate(context.Background(), pool); err != nil {
		t.Fatal(err)
	}
	return pool, dsn
}

// workerService is the service of a worker with its own repository
// (dir/repo, password pw) and catalog: what it would read from its own
// configuration file.
func workerService(t *testing.T, dir string) *service.Service {
	pw := func() ([]byte, error) { return []byte("pw"), nil }
	s := service.New(service.Config{Repository: service.Location{Location: filepath.Join(dir, "repo"), Password: pw},
		Catalog: filepath.Join(dir, "catalog.db"), StateDir: filepath.Join(dir, "state"), Local: true, Operations: testOperations})
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// startClient starts c and stops it when the test ends.
func startClient(t *testing.T, c *queue.Client, err error) *queue.Client {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Stop(ctx)
	})
	return c
}

// startWorker starts worker name (epoch 1, two slots) with its own
// service in a directory of its own, which it returns.
func startWorker(t *testing.T, pool *pgxpool.Pool, name string, fence queue.FenceFunc) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	c, err := queue.NewWorker(pool, queue.Config{Name: name, ID: "worker-" + name, Epoch: 1, Slots: 2,
		Service: workerService(t, dir), Fence: fence, Logger: quiet})
	startClient(t, c, err)
	return dir
}

// startServer starts a server's client: the submitter, and River's
// maintenance.
func startServer(t *testing.T, pool *pgxpool.Pool) *queue.Client {
	t.Helper()
	c, err := queue.NewServer(pool, queue.Config{ID: "server", Service: workerService(t, t.TempDir()), Logger: quiet})
	return startClient(t, c, err)
}

func waitOutcome(t *testing.T, srv *queue.Client, id int64, within time.Duration) *queue.Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	o, err := srv.Wait(ctx, id)
	if err != nil {
		t.Fatalf("hand-off %d: %v", id, err)
	}
	return o
}
