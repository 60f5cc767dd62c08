package postgres_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/postgres"
	"github.com/coffer-backup/coffer/internal/catalog/sqlite"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// loginAs connects to dsn's database as role with password.
func loginAs(t *testing.T, dsn, role, password string) (*pgx.Conn, error) {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Password = role, password
	return pgx.ConnectConfig(context.Background(), cfg)
}

func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

const (
	secret1 = "c2VjcmV0LW9uZS1zZWNyZXQtb25lLXNlY3JldC1vbmU"
	secret2 = "c2VjcmV0LXR3by1zZWNyZXQtdHdvLXNlY3JldC10d28"
)

// A worker's credential is a login role with the workers' grants only:
// it reads the configuration objects and its own registry row, not the
// access tables, cannot change another worker's row, and is re-keyed and
// revoked in place.
func TestWorkerCredentials(t *testing.T) {
	ctx := context.Background()
	dsn, c, creds := workerCatalog(t)
	now := time.Now()
	for _, name := range []string{"kvm1", "kvm2"} {
		if _, err := c.RegisterWorker(ctx, catalog.Worker{Name: name, Protocol: 1, Slots: 1}, now); err != nil {
			t.Fatal(err)
		}
	}
	if err := creds.SetWorkerCredential(ctx, "kvm1", secret1); err != nil {
		t.Fatal(err)
	}
	w, err := loginAs(t, dsn, "coffer_worker_kvm1", secret1)
	if err != nil {
		t.Fatalf("the worker's role cannot log in: %v", err)
	}
	defer w.Close(ctx)

	checkWorkerGrants(t, c, w)

	// Re-keyed: the old secret no longer logs in.
	if err := creds.SetWorkerCredential(ctx, "kvm1", secret2); err != nil {
		t.Fatal(err)
	}
	if _, err := loginAs(t, dsn, "coffer_worker_kvm1", secret1); sqlState(err) != "28P01" {
		t.Fatalf("the replaced secret: %v", err)
	}
	states, err := creds.WorkerCredentials(ctx)
	if err != nil || len(states) != 1 || states["kvm1"] != catalog.CredentialActive {
		t.Fatalf("credentials: %v %v", states, err)
	}

	// Revoked: the open session can do nothing more, is ended, and the
	// worker's heartbeat is expired.
	r, err := creds.RevokeWorkerCredential(ctx, "kvm1")
	if err != nil || r.Sessions != 1 || !r.Expired {
		t.Fatalf("revoke: %+v %v", r, err)
	}
	if _, err := w.Exec(ctx, `SELECT count(*) FROM workers`); err == nil {
		t.Fatal("the revoked worker's session still reads the registry")
	}
	if _, err := loginAs(t, dsn, "coffer_worker_kvm1", secret2); sqlState(err) != "28000" {
		t.Fatalf("the revoked role logs in: %v", err)
	}
	if lost, err := c.DeclareWorkersLost(ctx, now.Add(-time.Hour)); err != nil || len(lost) != 1 || lost[0].Name != "kvm1" {
		t.Fatalf("the revoked worker is not overdue: %+v %v", lost, err)
	}
	if states, _ := creds.WorkerCredentials(ctx); states["kvm1"] != catalog.CredentialRevoked {
		t.Fatalf("credentials after the revocation: %v", states)
	}
	if _, err := creds.RevokeWorkerCredential(ctx, "kvm9"); !errors.Is(err, catalog.ErrNotFound) {
		t.Fatalf("revoke a worker without a credential: %v", err)
	}
	// A new token lets it in again.
	if err := creds.SetWorkerCredential(ctx, "kvm1", secret1); err != nil {
		t.Fatal(err)
	}
	w2, err := loginAs(t, dsn, "coffer_worker_kvm1", secret1)
	if err != nil {
		t.Fatalf("a new token after the revocation: %v", err)
	}
	defer w2.Close(ctx)
	var n int
	if err := w2.QueryRow(ctx, `SELECT count(*) FROM workers`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the re-admitted worker: %v", err)
	}
	checkStoredVerifier(t, dsn)
}

// checkWorkerGrants: the worker's session w reads the configuration and
// its own registry row, not the access tables nor others' rows.
func checkWorkerGrants(t *testing.T, c catalog.Catalog, w *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	var n int
	// What it may: the configuration, its own row (and nothing of others').
	if err := w.QueryRow(ctx, `SELECT count(*) FROM config_objects`).Scan(&n); err != nil {
		t.Fatalf("read the configuration objects: %v", err)
	}
	if err := w.QueryRow(ctx, `SELECT count(*) FROM workers`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("the worker sees %d registry rows (%v), want its own", n, err)
	}
	tag, err := w.Exec(ctx, `UPDATE workers SET slots = 99 WHERE name = 'kvm2'`)
	if err != nil || tag.RowsAffected() != 0 {
		t.Fatalf("an UPDATE of another worker's row: %v, %d rows", err, tag.RowsAffected())
	}
	if _, err := w.Exec(ctx, `INSERT INTO workers (name, epoch, protocol, slots, state, heartbeat_at, registered_at)
		VALUES ('kvm3', 1, 1, 1, 'ready', now(), now())`); sqlState(err) != "42501" {
		t.Fatalf("registering another worker's name: %v", err)
	}
	// What it may not: the access tables, the schema.
	for _, table := range []string{"users", "api_tokens", "sessions", "acl", "audit_log", "setup_tokens", "backup_points", "jobs"} {
		if _, err := w.Exec(ctx, `SELECT * FROM `+table+` LIMIT 1`); sqlState(err) != "42501" {
			t.Errorf("SELECT from %s as a worker: %v, want permission denied", table, err)
		}
	}
	// A running task's progress (SetWorkerTaskProgress's statement), its
	// unit's end (EndWorkerUnitTx's), and nothing else of a task.
	if _, err := w.Exec(ctx, `UPDATE tasks SET bytes_logical = 1, bytes_read = 1, bytes_stored = 1 WHERE id = 1 AND status = 'running'`); err != nil {
		t.Errorf("record a task's progress as a worker: %v", err)
	}
	if _, err := w.Exec(ctx, `UPDATE tasks SET status = 'success', finished_at = now(), error = '', backup_point_id = 'p', mode = 'full',
		warnings = NULL, snapshot_mode_achieved = '' WHERE id = 1 AND job_id = 1 AND attempts = 1 AND status = 'running'`); err != nil {
		t.Errorf("record a unit's end as a worker: %v", err)
	}
	for _, stmt := range []string{`UPDATE tasks SET vm_id = 'other' WHERE id = 1`, `UPDATE tasks SET job_id = 2 WHERE id = 1`,
		`UPDATE backup_points SET protected = true`, `DELETE FROM backup_points`, `DELETE FROM tasks`} {
		if _, err := w.Exec(ctx, stmt); sqlState(err) != "42501" {
			t.Errorf("%s as a worker: %v, want permission denied", stmt, err)
		}
	}
	if _, err := w.Exec(ctx, `CREATE TABLE public.stolen (x int)`); sqlState(err) != "42501" {
		t.Errorf("CREATE TABLE as a worker: %v, want permission denied", err)
	}
	ws, err := c.ListWorkers(ctx)
	if err != nil || len(ws) != 2 || ws[1].Slots != 1 {
		t.Fatalf("the registry after the worker's attempts: %+v %v", ws, err)
	}
}

// checkStoredVerifier: the database holds the secret's SCRAM verifier,
// not the secret.
func checkStoredVerifier(t *testing.T, dsn string) {
	t.Helper()
	ctx := context.Background()
	var stored string
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT rolpassword FROM pg_authid WHERE rolname = 'coffer_worker_kvm1'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stored, "SCRAM-SHA-256$4096:") || strings.Contains(stored, secret1) {
		t.Fatalf("stored password: %q", stored)
	}
}

// A worker opens the catalog without migrating it and refuses another
// schema version; SQLite has no worker credentials.
func TestOpenCheckedRefusesSkew(t *testing.T) {
	ctx := context.Background()
	dsn := testutil.StartPostgres(t)
	if _, err := postgres.OpenChecked(ctx, dsn, postgres.Options{}); err == nil || !strings.Contains(err.Error(), "older than this coffer speaks") {
		t.Fatalf("an empty database: %v", err)
	}
	c, err := postgres.Open(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	checked, err := postgres.OpenChecked(ctx, dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_ = checked.Close()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', '')`); err != nil {
		t.Fatal(err)
	}
	var skew postgres.ErrSchemaSkew
	if _, err := postgres.OpenChecked(ctx, dsn, postgres.Options{}); !errors.As(err, &skew) || skew.Database != 999 {
		t.Fatalf("a newer schema: %v", err)
	}

	lite, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "catalog.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	lcreds, _ := catalog.WorkerCredentialsOf(lite)
	if err := lcreds.SetWorkerCredential(ctx, "kvm1", secret1); !errors.Is(err, catalog.ErrNeedsPostgres) {
		t.Fatalf("a SQLite catalog's worker credential: %v", err)
	}
}

// A server's start states the workers' grants again: a token made by an
// older coffer, whose group lacks a grant a newer worker's code path
// needs, works once a newer server has started.
func TestAServerStartRestatesTheWorkersGrants(t *testing.T) {
	ctx := context.Background()
	dsn, _, creds := workerCatalog(t)
	if err := creds.SetWorkerCredential(ctx, "kvm1", secret1); err != nil {
		t.Fatal(err)
	}
	server, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close(ctx)
	// The older coffer's group: no right to a task's covered bytes.
	if _, err := server.Exec(ctx, `REVOKE UPDATE (bytes_logical) ON tasks FROM coffer_worker`); err != nil {
		t.Fatal(err)
	}
	w, err := loginAs(t, dsn, "coffer_worker_kvm1", secret1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	const progress = `UPDATE tasks SET bytes_logical = 1 WHERE id = 1 AND status = 'running'`
	if _, err := w.Exec(ctx, progress); sqlState(err) != "42501" {
		t.Fatalf("the older group's worker wrote a task's covered bytes: %v", err)
	}
	if err := creds.ProtectWorkerQueue(ctx); err != nil { // what a server does at start
		t.Fatal(err)
	}
	if _, err := w.Exec(ctx, progress); err != nil {
		t.Fatalf("after a server's start, the worker still may not write its progress: %v", err)
	}
}

// workerCatalog is a PostgreSQL catalog (closed at the test's end) whose
// server may make worker credentials, with its DSN.
func workerCatalog(t *testing.T) (string, catalog.Catalog, catalog.WorkerCredentials) {
	t.Helper()
	dsn := testutil.StartPostgres(t)
	testutil.RequirePasswords(t, dsn)
	c, err := postgres.Open(context.Background(), dsn, postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	creds, ok := catalog.WorkerCredentialsOf(c)
	if !ok {
		t.Fatal("a PostgreSQL catalog has no worker credentials")
	}
	return dsn, c, creds
}
