package postgres_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogtest"
	"github.com/coffer-backup/coffer/internal/catalog/postgres"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// freshSchema creates an empty schema on the server and returns a DSN
// whose search_path points at it: each test gets a database of its own
// without the cost of CREATE DATABASE.
func freshSchema(t testing.TB, serverDSN string) string {
	t.Helper()
	ctx := context.Background()
	name := fmt.Sprintf("t%d", schemaSeq.Add(1))
	conn, err := pgx.Connect(ctx, serverDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+name); err != nil {
		t.Fatal(err)
	}
	return serverDSN + "&search_path=" + name
}

var schemaSeq atomic.Int64

func TestConformance(t *testing.T) {
	server := testutil.StartPostgres(t)
	catalogtest.Run(t, func(t *testing.T) catalogtest.Opener {
		dsn := freshSchema(t, server)
		return func(ctx context.Context) (catalog.Catalog, error) {
			return postgres.Open(ctx, dsn, postgres.Options{})
		}
	})
}

// A catalog written by a coffer with schema version 1 is migrated in
// place: its rows keep their values and gain empty snapshot modes, its
// policy runs become kind backup-policy and their events numbered logs.
func TestUpgradeFromVersion1(t *testing.T) {
	ctx := context.Background()
	dsn := freshSchema(t, testutil.StartPostgres(t))
	ms, err := postgres.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// The rows catalogtest.CheckUpgradeFromV1 expects.
	for _, q := range []string{
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`,
		ms[0].SQL,
		`INSERT INTO schema_migrations VALUES (1, 'init', '')`,
		`INSERT INTO jobs (id, kind, created_at) VALUES (1, 'backup', now())`,
		`INSERT INTO tasks (job_id, vm_name, status, snapshot_mode, backup_point_id) VALUES (1, 'web', 'success', 'quiesced', 'old')`,
		`INSERT INTO backup_points (repository, id, taken_at, vm_name, mode) VALUES ('r', 'old', now(), 'web', 'full')`,
		`INSERT INTO events (occurred_at, job_id, kind, message) VALUES (now(), 1, 'job-start', 'first')`,
		`INSERT INTO events (occurred_at, kind, message) VALUES (now(), 'server-started', 'no job')`,
		`INSERT INTO events (occurred_at, job_id, kind, message) VALUES (now(), 1, 'job-end', 'second')`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%v: %s", err, q)
		}
	}
	c, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	catalogtest.CheckUpgradeFromV1(t, c)
}

// go test -run '^$' -bench Writes -benchtime 1x ./internal/catalog/postgres/
func BenchmarkWrites(b *testing.B) {
	dsn := freshSchema(b, testutil.StartPostgres(b))
	catalogtest.BenchmarkWrites(b, func(ctx context.Context) (catalog.Catalog, error) {
		return postgres.Open(ctx, dsn, postgres.Options{})
	})
}

// Notices are per database, but a catalog hears only its own schema's:
// two catalogs in one database do not wake each other.
func TestWatchJobsHearsOnlyItsSchema(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	server := testutil.StartPostgres(t)
	a, err := postgres.Open(ctx, freshSchema(t, server), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := postgres.Open(ctx, freshSchema(t, server), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	notices, err := a.WatchJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.CreateJob(ctx, &catalog.Job{Kind: catalog.KindGC}); err != nil {
		t.Fatal(err)
	}
	mine := &catalog.Job{Kind: catalog.KindVerify}
	if err := a.CreateJob(ctx, mine); err != nil {
		t.Fatal(err)
	}
	// Notices come in commit order: had the other schema's been heard,
	// it would come first.
	if n := catalogtest.NextNotice(t, notices); n != (catalog.JobNotice{JobID: mine.ID, What: catalog.NoticeCreated}) {
		t.Fatalf("first notice %+v, want the creation of job %d of this schema", n, mine.ID)
	}
}

// A listening session that breaks is re-established: the watcher is told
// that notices may have been lost (resync), then hears new changes.
func TestWatchJobsSurvivesALostConnection(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	server := testutil.StartPostgres(t)
	c, err := postgres.Open(ctx, freshSchema(t, server), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	notices, err := c.WatchJobs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var killed int
	if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`,
		"coffer catalog listener").Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminated %d listening sessions (%v), want 1", killed, err)
	}
	if n := catalogtest.NextNotice(t, notices); n.What != catalog.NoticeResync || n.JobID != 0 {
		t.Fatalf("after the session broke: %+v, want a resync", n)
	}
	j := &catalog.Job{Kind: catalog.KindVerify}
	if err := c.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	if n := catalogtest.NextNotice(t, notices); n != (catalog.JobNotice{JobID: j.ID, What: catalog.NoticeCreated}) {
		t.Fatalf("after reconnecting: %+v", n)
	}
}

// The listening session of lines, once it holds, delivers a resync; when
// it breaks it is re-established with another resync, then hears new
// lines.
func TestWatchJobLinesSurvivesALostConnection(t *testing.T) {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	server := testutil.StartPostgres(t)
	c, err := postgres.Open(ctx, freshSchema(t, server), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lw, ok := c.(interface {
		WatchJobLines(context.Context) (<-chan catalog.JobNotice, error)
	})
	if !ok {
		t.Fatal("the PostgreSQL catalog has no WatchJobLines")
	}
	notices, err := lw.WatchJobLines(ctx)
	if err != nil {
		t.Fatal(err)
	}
	resync := catalog.JobNotice{What: catalog.NoticeResync}
	if n := catalogtest.NextNotice(t, notices); n != resync {
		t.Fatalf("once listening: %+v, want a resync", n)
	}
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var killed int
	if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`,
		"coffer catalog line listener").Scan(&killed); err != nil || killed != 1 {
		t.Fatalf("terminated %d listening sessions of lines (%v), want 1", killed, err)
	}
	if n := catalogtest.NextNotice(t, notices); n != resync {
		t.Fatalf("after the session broke: %+v, want a resync", n)
	}
	j := &catalog.Job{Kind: catalog.KindVerify}
	if err := c.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	if err := c.AddEvents(ctx, []catalog.Event{{JobID: j.ID, Kind: "line"}}); err != nil {
		t.Fatal(err)
	}
	if n := catalogtest.NextNotice(t, notices); n != (catalog.JobNotice{JobID: j.ID, What: catalog.NoticeLog}) {
		t.Fatalf("after reconnecting: %+v, want the line's notice (and not the creation's)", n)
	}
}
