package clitest

import (
	"context"
	"errors"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/coffer-backup/coffer/internal/fleet/queue"
)

// WorkerLogin is the flags that log `coffer worker` name in to the env's
// PostgreSQL catalog (COFFER_CATALOG) with a credential of its own, as a
// worker must: its token, made with `coffer workers token create NAME` as
// an operator does on a server's host and kept in a file of the env's
// (made once per name: a second token would replace the first, which a
// worker of that name may still use), and --catalog, the catalog's
// address without user or password. River's schema is migrated first, as
// the first server's start does: a worker with a token never migrates,
// and some tests start workers without a server.
func (e *Env) WorkerLogin(name string) []string {
	e.T.Helper()
	file := filepath.Join(e.Dir, "worker-"+name+".token")
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		e.migrateQueue()
		token := strings.TrimSpace(e.Must("workers", "token", "create", name))
		if err := os.WriteFile(file, []byte(token+"\n"), 0o600); err != nil {
			e.T.Fatal(err)
		}
	}
	return []string{"--catalog", e.CatalogAddress(), "--token-file", file}
}

// CatalogAddress is the env's PostgreSQL catalog's address without its
// credentials, as a worker with a token is given it.
func (e *Env) CatalogAddress() string {
	e.T.Helper()
	u, err := url.Parse(e.Vars["COFFER_CATALOG"])
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		e.T.Fatalf("the env's catalog %q is not a PostgreSQL address: a worker needs one", e.Vars["COFFER_CATALOG"])
	}
	u.User = nil
	return u.String()
}

// migrateQueue migrates River's schema in the env's catalog.
func (e *Env) migrateQueue() {
	e.T.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, e.Vars["COFFER_CATALOG"])
	if err != nil {
		e.T.Fatal(err)
	}
	defer pool.Close()
	if _, err := queue.Migrate(ctx, pool); err != nil {
		e.T.Fatalf("migrate River's schema: %v", err)
	}
}
