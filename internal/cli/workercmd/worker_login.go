package workercmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/catalog/postgres"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/fleet"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/operations"
)

// tokenEnv holds a worker's token itself, for a supervisor that passes
// credentials in the environment (systemd's LoadCredential= is a file:
// --token-file). Never a flag's value: it would show in ps.
const tokenEnv = "COFFER_WORKER_TOKEN"

// readToken is the worker's token from --token-file, else
// $COFFER_WORKER_TOKEN, else the unit's credential worker-token under
// systemd ("" for none).
// workerTokenCredential names the credential systemd loads the worker's
// token into (coffer-worker.service).
const workerTokenCredential = "worker-token"

func readToken(file string) (string, error) {
	if t := strings.TrimSpace(os.Getenv(tokenEnv)); file == "" && t != "" {
		return t, nil
	}
	if file == "" {
		// Under systemd: LoadCredential=worker-token:FILE in the unit.
		if file = config.Credential(nil, workerTokenCredential); file == "" {
			return "", nil
		}
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", command.Usagef("--token-file: %v", err)
	}
	t := strings.TrimSpace(string(b))
	if t == "" {
		return "", command.Usagef("--token-file %s is empty", file)
	}
	return t, nil
}

// connection is a worker's catalog and the work it runs on it.
type connection struct {
	cat  catalog.Catalog
	svc  *service.Service
	work func(m *fleet.Member, log *slog.Logger) fleet.Work
}

// connect opens the catalog as the worker logs in: with its token, as its
// own role, checking (never migrating) the catalog's and the queue's
// schemas; so too with a --catalog that logs in as a worker's own role
// (coffer_worker_NAME, the token written out). Any other credentials of
// --catalog are the servers', which reach the API's users and tokens and
// every queue: a worker is refused them unless insecure says to use them
// (tests).
func (a *app) connect(ctx context.Context, loc, token string, insecure bool, schemaWait time.Duration, cfg *fleet.Config,
	scfg service.Config) (connection, error) {
	login := login{cfg: cfg, scfg: scfg, schemaWait: schemaWait, log: a.Log}
	if token != "" {
		dsn, name, err := fleet.WorkerDSN(loc, token)
		if err != nil {
			return connection{}, command.Usagef("%v", err)
		}
		return login.as(ctx, dsn, name, "the token")
	}
	if name, own := fleet.WorkerOfDSN(loc); own {
		return login.as(ctx, loc, name, "--catalog's role")
	}
	if !insecure {
		return connection{}, command.Usagef("a worker logs in to the catalog with a credential of its own, not the servers' (--catalog %s): "+
			"make its token with coffer workers token create NAME (on a server's host, or with --server), then start it with "+
			"--token-file FILE and --catalog set to the catalog's address without user or password "+
			"(--insecure-catalog-credentials uses --catalog's credentials: for tests only)", catalogopen.Redact(loc))
	}
	a.Log.Warn("the worker logs in with the catalog's own credentials (--insecure-catalog-credentials, for tests only): " +
		"give it a token of its own (coffer workers token create NAME, then --token-file)")
	// Opened once and kept open for the service: each unit would open
	// (and migrate) the catalog again otherwise.
	cat, err := catalogopen.Open(ctx, loc)
	if err != nil {
		return connection{}, fmt.Errorf("open catalog %s: %w", catalogopen.Redact(loc), err)
	}
	scfg.OpenCatalog = cat
	s := operations.New(scfg)
	return connection{cat: cat, svc: s, work: func(m *fleet.Member, log *slog.Logger) fleet.Work { return fleet.QueueWork(loc, m, s, log) }}, nil
}

// login is what a worker logs in to the catalog with.
type login struct {
	cfg        *fleet.Config
	scfg       service.Config
	schemaWait time.Duration // for River's schema, when older (fleet.CheckQueue)
	log        *slog.Logger
}

// as logs in at dsn as worker name's own role (named by what, the token
// or --catalog), checking the catalog's and the queue's schemas.
func (l login) as(ctx context.Context, dsn, name, what string) (connection, error) {
	cfg, scfg := l.cfg, l.scfg
	if cfg.Name == "" {
		cfg.Name = name
	} else if cfg.Name != name {
		return connection{}, command.Usagef("--name is %s, but %s is worker %s's: a worker logs in as the worker its credential names", cfg.Name, what, name)
	}
	cat, err := catalogopen.OpenChecked(ctx, dsn)
	if err != nil {
		return connection{}, refusedToken(err, name)
	}
	if err := fleet.CheckQueue(ctx, dsn, l.schemaWait, l.log); err != nil {
		_ = cat.Close()
		return connection{}, refusedToken(err, name)
	}
	scfg.Catalog, scfg.OpenCatalog = dsn, cat
	svc := operations.New(scfg)
	return connection{cat: cat, svc: svc, work: func(m *fleet.Member, log *slog.Logger) fleet.Work {
		return fleet.CheckedQueueWork(dsn, m, svc, log)
	}}, nil
}

// refusedToken says plainly why the catalog refused a worker: its token
// (a wrong, replaced or revoked one: class unauthenticated), its role's
// grants (denied), or a schema of another version than this coffer's.
func refusedToken(err error, name string) error {
	var skew postgres.ErrSchemaSkew
	if errors.As(err, &skew) || errors.Is(err, fleet.ErrQueueSkew) {
		return api.WithClass(api.UnsupportedVersion, err)
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	switch {
	case strings.HasPrefix(pe.Code, "28"):
		return api.WithClass(api.Unauthenticated, fmt.Errorf(
			"the catalog refused worker %s's token (%s): it is wrong, was replaced by a newer one, or was revoked; coffer workers token create %s makes a new one",
			name, pe.Message, name))
	case pe.Code == "42501":
		return api.WithClass(api.Denied, fmt.Errorf(
			"the catalog refused worker %s what it needs (%s): its token was revoked, or the workers' grants are missing (coffer workers token create %s states them again)",
			name, pe.Message, name))
	}
	return err
}
