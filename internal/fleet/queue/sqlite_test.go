package queue_test

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
)

// These tests try River's SQLite driver (riversqlite, "early testing" in
// its own words) on coffer's embedded catalog: the very file the catalog
// writes (modernc's database/sql driver, WAL), with the catalog writing
// beside it, and in a process killed -9 at random. What they found is in
// docs/design/fleet.md ("The single host").

// sqliteJob is the probe's job: it writes the catalog (a job row named
// after it) as a hand-off's operation would, unless its worker has no
// catalog, then waits Millis.
type sqliteJob struct {
	Millis int `json:"millis"`
}

func (sqliteJob) Kind() string { return "coffer_sqlite_probe" }

type sqliteWorker struct {
	river.WorkerDefaults[sqliteJob]
	cat     catalog.Catalog
	started chan<- time.Time
}

func (w *sqliteWorker) Work(ctx context.Context, job *river.Job[sqliteJob]) error {
	if w.started != nil {
		w.started <- time.Now()
	}
	if w.cat != nil {
		if err := w.cat.CreateJob(ctx, &catalog.Job{Kind: catalog.KindBackupVM, Status: catalog.StatusRunning,
			Worker: fmt.Sprintf("probe-%d", job.ID), CreatedAt: time.Now()}); err != nil {
			return err
		}
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(job.Args.Millis) * time.Millisecond):
		return nil
	}
}

// openRiverSQLite opens the catalog's file for River as its driver asks:
// one connection (River's own advice against SQLITE_BUSY), waiting out
// the catalog's writer.
func openRiverSQLite(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+(&url.URL{Path: path}).EscapedPath()+"?_busy_timeout=30000&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = db.Close() })
	m, err := rivermigrate.New(riversqlite.New(db), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Migrate(context.Background(), rivermigrate.DirectionUp, nil); err != nil {
		t.Fatal(err)
	}
	return db
}

func sqliteClient(t *testing.T, db *sql.DB, w *sqliteWorker, errs *atomic.Int64) *river.Client[*sql.Tx] {
	t.Helper()
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	c, err := river.NewClient(riversqlite.New(db), &river.Config{
		ID:     fmt.Sprintf("sqlite-%d", os.Getpid()),
		Queues: map[string]river.QueueConfig{"w-a": {MaxWorkers: 2}}, Workers: workers,
		FetchCooldown: 10 * time.Millisecond, FetchOnlyKnownKinds: true, JobTimeout: -1, MaxAttempts: 1,
		ErrorHandler: countErrors{errs}, Logger: quiet,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type countErrors struct{ n *atomic.Int64 }

func (c countErrors) HandleError(_ context.Context, _ *rivertype.JobRow, err error) *river.ErrorHandlerResult {
	c.n.Add(1)
	fmt.Fprintln(os.Stderr, "sqlite probe: job error:", err)
	return nil
}

func (c countErrors) HandlePanic(_ context.Context, _ *rivertype.JobRow, v any, _ string) *river.ErrorHandlerResult {
	c.n.Add(1)
	return nil
}

// TestSQLiteDriverBesideTheCatalog: River works its queue on the
// catalog's file while the catalog writes too; every job runs once, and
// the latency from insert to start is logged.
func TestSQLiteDriverBesideTheCatalog(t *testing.T) {
	ctx := context.Background()
	path := t.TempDir() + "/catalog.db"
	cat, err := catalogopen.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	db := openRiverSQLite(t, path)
	started := make(chan time.Time, 1)
	var jobErrs atomic.Int64
	c := sqliteClient(t, db, &sqliteWorker{cat: cat, started: started}, &jobErrs)
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}

	// The catalog's own load meanwhile: a task's heartbeat every 5 ms.
	load, stop := make(chan error, 1), make(chan struct{})
	go func() {
		j := &catalog.Job{Kind: catalog.KindBackupPolicy, Status: catalog.StatusRunning, CreatedAt: time.Now()}
		err := cat.CreateJob(ctx, j)
		for err == nil {
			select {
			case <-stop:
				load <- nil
				return
			case <-time.After(5 * time.Millisecond):
			}
			_, err = cat.Heartbeat(ctx, j.ID, nil)
		}
		load <- err
	}()

	const n = 200
	var lat []time.Duration
	for i := range n {
		time.Sleep(rand.N(50 * time.Millisecond))
		t0 := time.Now()
		res, err := c.Insert(ctx, sqliteJob{}, &river.InsertOpts{Queue: "w-a"})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case s := <-started:
			lat = append(lat, s.Sub(t0))
		case <-time.After(10 * time.Second):
			row, err := c.JobGet(ctx, res.Job.ID)
			t.Fatalf("job %d of %d did not start within 10 s: %+v, %v", i+1, n, row, err)
		}
	}
	close(stop)
	if err := c.Stop(ctx); err != nil { // the last job's write
		t.Fatal(err)
	}
	if err := <-load; err != nil {
		t.Fatalf("the catalog's writes beside River: %v", err)
	}
	slices.Sort(lat)
	t.Logf("riversqlite insert-to-start: n=%d p50=%v p99=%v max=%v", n, lat[n/2], lat[n*99/100], lat[n-1])
	jobs, err := cat.ListJobs(ctx, catalog.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	probes := 0
	for _, j := range jobs {
		if strings.HasPrefix(j.Worker, "probe-") {
			probes++
		}
	}
	if probes != n || jobErrs.Load() != 0 {
		t.Fatalf("%d of %d jobs wrote the catalog, %d job errors", probes, n, jobErrs.Load())
	}
}
