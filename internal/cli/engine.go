package cli

import (
	"context"
	"errors"
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

// connectorKind is one hypervisor platform: how a connection's options are
// checked (without contacting anything) and how it is opened, and what the
// platform cannot do, so a policy asking for it is refused before it runs
// instead of failing or degrading VM by VM.
type connectorKind struct {
	check func(cfg ConnectionConfig) error
	open  func(ctx context.Context, cfg ConnectionConfig) (hypervisor.Connector, error)
	// cannot names the snapshot modes the platform cannot take, and why.
	cannot map[hypervisor.SnapshotMode]string
	// storageSnapshots: the connector itself provides storage-level
	// snapshots (a StorageSnapshotter method), as group: datastore needs.
	storageSnapshots bool
}

// connectorKinds is the one registry of hypervisor platforms: each
// connector package's wiring file adds its kind here (no init() side
// effects elsewhere).
var connectorKinds = map[string]connectorKind{
	"fake": {check: checked(fakeOptions), open: newFakeConnector, storageSnapshots: true, // a simulated array
		cannot: map[hypervisor.SnapshotMode]string{hypervisor.WithMemory: "the simulated fleet has no memory to save"}},
	"qemu":    {check: checked(qemuOptions), open: newQEMUConnector},
	"vsphere": {check: checked(vsphereOptions), open: newVSphereConnector},
}

func checked[T any](decode func(ConnectionConfig) (T, error)) func(ConnectionConfig) error {
	return func(cfg ConnectionConfig) error {
		_, err := decode(cfg)
		return err
	}
}

// engineConfig loads the engine's configuration sections and checks them
// and every connection's options, without contacting anything. Commands
// that run policies use policyConfig, which also refuses what a policy
// cannot really do.
func (a *app) engineConfig() (*policy.Config, error) {
	cfg, _, err := a.loadEngineConfig(false)
	return cfg, err
}

// policyConfig is engineConfig plus what each policy will really do on its
// connections (policyFindings): errors refuse the configuration, warnings
// are returned by policy name.
func (a *app) policyConfig() (*policy.Config, map[string][]finding, error) {
	return a.loadEngineConfig(true)
}

func (a *app) loadEngineConfig(policies bool) (*policy.Config, map[string][]finding, error) {
	fail := func(err error) (*policy.Config, map[string][]finding, error) {
		where := a.file.Path
		if where == "" {
			where = "configuration"
		}
		return nil, nil, usagef("%s: %v", where, err)
	}
	cfg, err := policy.Decode(a.file)
	if err != nil {
		return fail(err)
	}
	errs := []error{cfg.Validate()}
	for _, c := range cfg.Connections {
		if c.Kind == "" {
			continue // Validate says so
		}
		kind, ok := connectorKinds[c.Kind]
		if !ok {
			errs = append(errs, fmt.Errorf("connection %s: this build of coffer has no %q connector (known: %s)", c.Name, c.Kind, strings.Join(sortedKinds(), ", ")))
			continue
		}
		errs = append(errs, kind.check(ConnectionConfig{Connection: c}))
	}
	warnings := map[string][]finding{}
	if policies {
		for _, p := range cfg.Policies {
			for _, f := range policyFindings(cfg, p) {
				if f.Level == levelError {
					errs = append(errs, errors.New(f.Message))
				} else {
					warnings[p.Name] = append(warnings[p.Name], f)
				}
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fail(err)
	}
	return cfg, warnings, nil
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
		kind, ok := connectorKinds[cc.Kind]
		if !ok {
			return nil, nil, usagef("connection %s: this build of coffer has no %q connector (known: %s)", name, cc.Kind, strings.Join(sortedKinds(), ", "))
		}
		c, err := kind.open(ctx, ConnectionConfig{Connection: *cc, StateDir: a.res.Path("state-dir"), Logger: a.log})
		if err != nil {
			return nil, nil, fmt.Errorf("connection %s: %w", name, err)
		}
		conns[name] = c
		if s, ok := c.(interface {
			StorageSnapshotter() hypervisor.StorageSnapshotter
		}); ok && kind.storageSnapshots {
			storage[name] = s.StorageSnapshotter()
		}
	}
	return conns, storage, nil
}

func sortedKinds() []string {
	var out []string
	for k := range connectorKinds {
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
