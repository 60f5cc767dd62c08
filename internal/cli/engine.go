package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
)

// ConnectionConfig is what a connector factory receives: the connection's
// configuration entry plus coffer-wide settings a connector may need.
type ConnectionConfig struct {
	policy.Connection
	// StateDir is where connectors journal what they create on a
	// hypervisor, so leftovers can be found after a crash.
	StateDir string
	Logger   *slog.Logger
}

// connectorFactories builds connectors by kind. It is the one registry of
// hypervisor platforms: each connector package's wiring file adds its kind
// here (no init() side effects elsewhere).
var connectorFactories = map[string]func(ctx context.Context, cfg ConnectionConfig) (hypervisor.Connector, error){
	"fake":    newFakeConnector,
	"qemu":    newQEMUConnector,
	"vsphere": newVSphereConnector,
}

// engineConfig loads and validates the engine's configuration sections.
func (a *app) engineConfig() (*policy.Config, error) {
	cfg, err := policy.Load(a.file)
	if err != nil {
		where := a.file.Path
		if where == "" {
			where = "configuration"
		}
		return nil, usagef("%s: %v", where, err)
	}
	return cfg, nil
}

// openConnectors builds the named connections. A connector that offers
// storage-level snapshots (a StorageSnapshotter method) is returned in the
// second map too.
func (a *app) openConnectors(ctx context.Context, cfg *policy.Config, names []string) (map[string]hypervisor.Connector, map[string]hypervisor.StorageSnapshotter, error) {
	conns := map[string]hypervisor.Connector{}
	storage := map[string]hypervisor.StorageSnapshotter{}
	for _, name := range names {
		if _, done := conns[name]; done {
			continue
		}
		var cc *policy.Connection
		for i := range cfg.Connections {
			if cfg.Connections[i].Name == name {
				cc = &cfg.Connections[i]
			}
		}
		if cc == nil {
			return nil, nil, usagef("no connection named %q in the configuration", name)
		}
		factory := connectorFactories[cc.Kind]
		if factory == nil {
			return nil, nil, usagef("connection %s: this build of coffer has no %q connector (known: %s)", name, cc.Kind, strings.Join(sortedKinds(), ", "))
		}
		c, err := factory(ctx, ConnectionConfig{Connection: *cc, StateDir: a.res.Path("state-dir"), Logger: a.log})
		if err != nil {
			return nil, nil, fmt.Errorf("connection %s: %w", name, err)
		}
		conns[name] = c
		if s, ok := c.(interface {
			StorageSnapshotter() hypervisor.StorageSnapshotter
		}); ok {
			storage[name] = s.StorageSnapshotter()
		}
	}
	return conns, storage, nil
}

func sortedKinds() []string {
	var out []string
	for k := range connectorFactories {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// repositoryOpener opens repositories by policy name: "" is the default
// repository (--repo / COFFER_REPO / `repository:`), others come from the
// repositories section with their own password files.
func (a *app) repositoryOpener(cfg *policy.Config) func(ctx context.Context, name string) (*repo.Repository, error) {
	return func(ctx context.Context, name string) (*repo.Repository, error) {
		if name == "" {
			return a.openRepo(ctx)
		}
		rc, ok := cfg.Repository(name)
		if !ok {
			return nil, usagef("no repository named %q in the configuration", name)
		}
		var pw []byte
		if rc.PasswordFile != "" {
			b, err := os.ReadFile(config.ExpandHome(rc.PasswordFile))
			if err != nil {
				return nil, usagef("repository %s: password file: %v", name, err)
			}
			pw = []byte(strings.TrimRight(string(b), "\r\n"))
		} else {
			var err error
			if pw, err = a.password(false); err != nil {
				return nil, err
			}
		}
		return a.openRepoAt(ctx, rc.Location, pw)
	}
}

// newEngine builds an engine over the given connections. Problems cleaning
// up leftovers are reported but do not stop the caller.
func (a *app) newEngine(ctx context.Context, cfg *policy.Config, cat catalog.Catalog, conns map[string]hypervisor.Connector,
	storage map[string]hypervisor.StorageSnapshotter) (*engine.Engine, error) {
	eng, err := engine.New(ctx, engine.Options{Config: cfg, Catalog: cat, Connectors: conns, StorageSnapshotters: storage,
		OpenRepository: a.repositoryOpener(cfg), Logger: a.log, Worker: hostname()})
	if eng == nil {
		return nil, err
	}
	if err != nil {
		a.log.Warn("cleaning up leftovers of earlier runs failed", "err", err)
		if !a.jsonOut && !a.quiet {
			fmt.Fprintf(a.stderr, "coffer: warning: %v\n", err)
		}
	}
	return eng, nil
}
