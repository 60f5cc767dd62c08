package testutil

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// RequirePasswords makes the PostgreSQL server of dsn (StartPostgres's,
// whose initdb trusts everyone) ask every role but the test's superuser
// for its password (SCRAM), as a production server does: tests of
// credentials need a server that checks them. It returns once the server
// has reloaded its pg_hba.conf.
func RequirePasswords(t testing.TB, dsn string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var hba, user string
	if err := conn.QueryRow(ctx, `SELECT current_setting('hba_file'), current_user`).Scan(&hba, &user); err != nil {
		t.Fatal(err)
	}
	rules := strings.Join([]string{
		"local all " + user + " trust",
		"host all " + user + " 0.0.0.0/0 trust",
		"local all all scram-sha-256",
		"host all all 0.0.0.0/0 scram-sha-256",
		"",
	}, "\n")
	if err := os.WriteFile(hba, []byte(rules), 0o600); err != nil { // the file keeps its owner
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `SELECT pg_reload_conf()`); err != nil {
		t.Fatal(err)
	}
	// The postmaster reloads asynchronously: a role that does not exist
	// is told "does not exist" (28000) under trust, and asked for a
	// password it cannot give (28P01) once the rules are in effect.
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Password = "coffer_no_such_role", "x"
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err == nil {
			_ = c.Close(ctx)
			t.Fatal("a role that does not exist logged in")
		}
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "28P01" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("PostgreSQL did not reload its pg_hba.conf within 30 s: %v", err)
		}
		time.Sleep(20 * time.Millisecond) // a poll's pace, not a synchronisation
	}
}
