package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogtest"
	"github.com/coffer-backup/coffer/internal/catalog/sqlcat"
	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
)

func TestConformance(t *testing.T) {
	catalogtest.Run(t, func(t *testing.T) catalogtest.Opener {
		path := filepath.Join(t.TempDir(), "sub", "catalog.db")
		return func(ctx context.Context) (catalog.Catalog, error) {
			return sqlite.Open(ctx, path, sqlite.Options{})
		}
	})
}

// A database migrated by a newer coffer (or by a build with a different
// history) is refused rather than used with a schema this build does not
// know.
func TestRefusesUnknownSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "catalog.db")
	c, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = c.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ms, err := sqlite.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	future := len(ms) + 1
	if _, err := db.Exec(`INSERT INTO schema_migrations VALUES (?, 'future', '')`, future); err != nil {
		t.Fatal(err)
	}
	var tooNew sqlcat.ErrSchemaTooNew
	if _, err := sqlite.Open(ctx, path, sqlite.Options{}); !errors.As(err, &tooNew) || tooNew.Database != future {
		t.Fatalf("open of a newer schema: %v", err)
	}
	if _, err := db.Exec(`DELETE FROM schema_migrations WHERE version = ?; UPDATE schema_migrations SET name = 'other'`, future); err != nil {
		t.Fatal(err)
	}
	if _, err := sqlite.Open(ctx, path, sqlite.Options{}); err == nil || !strings.Contains(err.Error(), "different build") {
		t.Fatalf("open of a different history: %v", err)
	}
}

// A catalog written by a coffer with schema version 1 is migrated in
// place: its rows keep their values and gain empty snapshot modes, its
// policy runs become kind backup-policy and their events numbered logs.
func TestUpgradeFromVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	ms, err := sqlite.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// The rows catalogtest.CheckUpgradeFromV1 expects.
	for _, q := range []string{
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`,
		ms[0].SQL,
		`INSERT INTO schema_migrations VALUES (1, 'init', '')`,
		`INSERT INTO jobs (id, kind, created_at) VALUES (1, 'backup', 0)`,
		`INSERT INTO tasks (job_id, vm_name, status, snapshot_mode, backup_point_id) VALUES (1, 'web', 'success', 'quiesced', 'old')`,
		`INSERT INTO backup_points (repository, id, taken_at, vm_name, mode) VALUES ('r', 'old', 0, 'web', 'full')`,
		`INSERT INTO events (occurred_at, job_id, kind, message) VALUES (0, 1, 'job-start', 'first')`,
		`INSERT INTO events (occurred_at, kind, message) VALUES (0, 'server-started', 'no job')`,
		`INSERT INTO events (occurred_at, job_id, kind, message) VALUES (0, 1, 'job-end', 'second')`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%v: %s", err, q)
		}
	}
	c, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	catalogtest.CheckUpgradeFromV1(t, c)
}

func TestMemory(t *testing.T) {
	ctx := context.Background()
	c, err := sqlite.Open(ctx, sqlite.Memory, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	j := &catalog.Job{Kind: "backup"}
	if err := c.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetJob(ctx, j.ID); err != nil {
		t.Fatal(err)
	}
}

// The file is in WAL mode, so readers never wait for the writer.
func TestWALMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	c, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v", mode, err)
	}
}

// go test -run '^$' -bench Writes -benchtime 1x ./internal/catalog/sqlite/
func BenchmarkWrites(b *testing.B) {
	path := filepath.Join(b.TempDir(), "catalog.db")
	catalogtest.BenchmarkWrites(b, func(ctx context.Context) (catalog.Catalog, error) {
		return sqlite.Open(ctx, path, sqlite.Options{})
	})
}

// SQLite cannot push changes to other processes: WatchJobs says so, and
// readers (internal/job) poll instead.
func TestWatchJobsUnsupported(t *testing.T) {
	c, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "catalog.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WatchJobs(context.Background()); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("WatchJobs on SQLite: %v, want errors.ErrUnsupported", err)
	}
}
