package command

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/operations"
	"github.com/coffer-backup/coffer/internal/store"
	storeall "github.com/coffer-backup/coffer/internal/store/all"
)

// StoreHook wraps every store a command opens. Crash tests replace it (in
// the test binary only) to kill the process at a chosen mutation.
var StoreHook = func(st store.Store) store.Store { return st }

// Service returns the service, built from the resolved settings on first
// use: flags, environment and file become the service's configuration
// structs here, and nowhere below.
func (a *App) Service() (*service.Service, error) {
	if a.svc != nil {
		return a.svc, nil
	}
	cfg, err := a.ServiceConfig()
	if err != nil {
		return nil, err
	}
	a.svc = operations.New(cfg)
	return a.svc, nil
}

// ServiceConfig is the service's configuration from the settings: the
// command line's (the server changes what it does differently).
func (a *App) ServiceConfig() (service.Config, error) {
	stores, err := a.storeConfig()
	if err != nil {
		return service.Config{}, err
	}
	a.pw = &passwordCache{get: func() ([]byte, error) { return a.Password(false) }}
	other := &passwordCache{get: func() ([]byte, error) {
		return a.passwordFrom("copy-target-password-file", "copy-target-password", false)
	}}
	return service.Config{
		Repository:    service.Location{Location: a.Res.String("repository"), Password: a.pw.password},
		OtherPassword: other.password,
		Stores:        stores,
		Catalog:       a.CatalogLocation(),
		StateDir:      a.Res.Path("state-dir"),
		Engine:        a.engine,
		Notify:        a.notify,
		EngineSource:  a.file.Path,
		Logger:        a.Log,
		Display:       cliDisplay{a},
		Maintenance:   a.maint,
		Metrics:       a.Metrics,
		WrapStore:     func(st store.Store) store.Store { return StoreHook(st) },
		// The command line acts as the local administrator: whoever
		// runs it here has the catalog and the repositories anyway.
		Local:         true,
		PublicURL:     a.Server.URL(a.Server.Listen),
		AccessOptions: a.Server.AuthOptions(),
	}, nil
}

// passwordCache asks for a password once, when it is first needed.
type passwordCache struct {
	mu   sync.Mutex
	get  func() ([]byte, error)
	done bool
	pw   []byte
}

func (c *passwordCache) password() ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done {
		pw, err := c.get()
		if err != nil {
			return nil, err
		}
		c.pw, c.done = pw, true
	}
	return c.pw, nil
}

// storeConfig resolves the s3.* and cache-* settings.
func (a *App) storeConfig() (storeall.Config, error) {
	var c storeall.Config
	var err error
	invalid := func(err error) (storeall.Config, error) { return c, api.WithClass(api.Invalid, err) }
	if c.S3.PathStyle, err = a.Res.Bool("s3.path-style"); err != nil {
		return invalid(err)
	}
	if c.S3.Connections, err = a.Res.Int("s3.connections"); err != nil {
		return invalid(err)
	}
	if c.S3.PartSizeBytes, err = ParseSize(a.Res.String("s3.part-size")); err != nil {
		return invalid(fmt.Errorf("s3.part-size: %w", err))
	}
	if c.CacheMaxBytes, err = ParseSize(a.Res.String("cache-max-size")); err != nil {
		return invalid(fmt.Errorf("cache-max-size: %w", err))
	}
	if c.CacheMinFreeBytes, err = ParseSize(a.Res.String("cache-min-free")); err != nil {
		return invalid(fmt.Errorf("cache-min-free: %w", err))
	}
	c.S3.Endpoint, c.S3.Region = a.Res.String("s3.endpoint"), a.Res.String("s3.region")
	c.S3.AccessKeyID, c.S3.SecretAccessKey = a.Res.String("s3.access-key-id"), a.Res.String("s3.secret-access-key")
	c.S3.CAFile, c.S3.LockMode, c.S3.ConditionalWrites = a.Res.Path("s3.ca-file"), a.Res.String("s3.lock-mode"), a.Res.String("s3.conditional-writes")
	c.RepoServer = storeall.RepoServerConfig{CredentialFile: a.Res.Path("repository-server.credential-file"),
		Credential: a.Res.String("repository-server.credential"), CAFile: a.Res.Path("repository-server.ca-file")}
	c.CacheDir = a.Res.Path("cache-dir")
	return c, nil
}

// CatalogLocation resolves the `catalog` setting. Unset, it is the SQLite
// file catalog.db in the state directory: state-dir when one is
// configured, else the platform default (catalogopen.DefaultLocation).
func (a *App) CatalogLocation() string {
	if loc := a.Res.String("catalog"); loc != "" {
		return config.ExpandHome(loc)
	}
	if dir, src := a.Res.Get("state-dir"); src != config.FromDefault && dir != "" {
		return filepath.Join(config.ExpandHome(dir), "catalog.db")
	}
	return catalogopen.DefaultLocation()
}

// Call runs a service operation with the service built from the settings.
func Call[T any](a *App, fn func(*service.Service) (T, error)) (T, error) {
	svc, err := a.Service()
	if err != nil {
		var zero T
		return zero, err
	}
	return fn(svc)
}

// cliDisplay shows long operations as they run: a progress bar on a
// terminal, warnings on stderr (unless --json or --quiet), the rest in
// the log.
type cliDisplay struct{ a *App }

func (c cliDisplay) Start(ctx context.Context, kind, object string) (context.Context, service.Job) {
	return ctx, &cliJob{a: c.a, ctx: ctx}
}

type cliJob struct {
	a   *App
	ctx context.Context
	mu  sync.Mutex
	bar *progressBar
}

func (t *cliJob) Log(level slog.Level, msg string, args ...any) {
	if level >= slog.LevelWarn && !t.a.JSON && !t.a.Quiet {
		var extra []string
		for i := 0; i+1 < len(args); i += 2 {
			extra = append(extra, fmt.Sprintf("%v=%v", args[i], args[i+1]))
		}
		if len(extra) > 0 {
			msg += " (" + strings.Join(extra, ", ") + ")"
		}
		fmt.Fprintf(t.a.Stderr, "coffer: warning: %s\n", msg)
		return
	}
	t.a.Log.Log(t.ctx, level, msg, args...)
}

func (t *cliJob) Progress(m service.Meter) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.bar.finish()
	detail := m.Detail
	if detail == nil {
		detail = func() string { return "" }
	}
	t.bar = t.a.startProgress(m.Label, m.Total, m.Done, detail)
}

func (t *cliJob) Finish(error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.bar.finish()
	t.bar = nil
}

// Opened is the service the command built (nil before the first
// operation ran here).
func (a *App) Opened() *service.Service { return a.svc }
