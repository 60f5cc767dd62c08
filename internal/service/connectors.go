package service

import (
	"context"
	"fmt"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	hvall "github.com/coffer-backup/coffer/internal/hypervisor/all"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/storagesnap"
)

// Connectors are hypervisor connections opened for one operation.
type Connectors struct {
	Conns   map[string]hypervisor.Connector
	Storage map[string]hypervisor.StorageSnapshotter
	// borrowed: the server's engine's connectors (servingEngine), which
	// stay open when the operation that borrowed them ends.
	Borrowed bool
}

// close ends the sessions of connectors opened for one operation (a
// vSphere login, a libvirt connection), so that a server listing,
// planning, backing up or restoring on request does not pile sessions up
// on vCenter or libvirtd.
func (c *Connectors) Close() {
	if c.Borrowed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, conn := range c.Conns {
		switch conn := conn.(type) {
		case interface{ Close(context.Context) error }:
			_ = conn.Close(ctx)
		case interface{ Close() error }:
			_ = conn.Close()
		}
	}
}

// OpenConnectors builds the named connections of cfg. A connector that
// offers storage-level snapshots (a StorageSnapshotter method) is in the
// storage map too. On a fleet's server, a connection its workers reach
// is not opened: the fleet's stand-in takes its place
// (connectors_fleet.go).
func (s *Service) OpenConnectors(ctx context.Context, cfg *policy.Config, names []string) (*Connectors, error) {
	out := &Connectors{Conns: map[string]hypervisor.Connector{}, Storage: map[string]hypervisor.StorageSnapshotter{}}
	for _, name := range names {
		if _, done := out.Conns[name]; done {
			continue
		}
		c, ok, err := s.standIn(ctx, cfg, name)
		if err == nil && !ok {
			c, err = s.openConnection(ctx, cfg, name, out)
		}
		if err != nil {
			out.Close()
			return nil, err
		}
		out.Conns[name] = c
	}
	s.withProviders(cfg, out)
	return out, nil
}

// openConnection opens connection name of cfg in this process, its
// storage snapshotter into out's.
func (s *Service) openConnection(ctx context.Context, cfg *policy.Config, name string, out *Connectors) (hypervisor.Connector, error) {
	cc, ok := cfg.Connection(name)
	if !ok {
		return nil, Invalidf("no connection named %q in the configuration", name)
	}
	kind, ok := hvall.Lookup(cc.Kind)
	if !ok {
		return nil, Invalidf("%v", hvall.UnknownKind(name, cc.Kind))
	}
	c, err := kind.Open(ctx, hvall.Config{Connection: cc, StateDir: s.Config.StateDir, Logger: s.log})
	if err != nil {
		return nil, fmt.Errorf("connection %s: %w", name, err)
	}
	if st, ok := c.(interface {
		StorageSnapshotter() hypervisor.StorageSnapshotter
	}); ok && kind.StorageSnapshots {
		out.Storage[name] = st.StorageSnapshotter()
	}
	return c, nil
}

// withProviders puts the storage-snapshots section's providers in place
// of a connector's own for the connections they cover. It is built anew
// from each configuration: a changed section takes effect at a reload
// even when the connection's definition did not change.
func (s *Service) withProviders(cfg *policy.Config, out *Connectors) {
	for name, sp := range storagesnap.For(cfg.StorageSnapshots, s.Config.StateDir, s.log) {
		if _, used := out.Conns[name]; used {
			out.Storage[name] = sp
		}
	}
}

// ConnectorSet keeps the connections the server opened across reloads of
// the configuration: a connection whose definition did not change keeps
// its connector (jobs old and new share it), a new or changed one is
// opened, and one no scheduled policy uses is dropped.
type ConnectorSet struct {
	s    *Service
	open map[string]openConnector
	// retired were dropped or replaced by a reload. Jobs started before
	// it run on with them (a job keeps the engine setup it started
	// with), so they are closed with the set, when the server stops, as
	// the engine closes the repositories a reload retired.
	retired []hypervisor.Connector
}

// NewConnectorSet is an empty set of s's connections.
func NewConnectorSet(s *Service) *ConnectorSet {
	return &ConnectorSet{s: s, open: map[string]openConnector{}}
}

// close ends the sessions of every connector the set opened.
func (cs *ConnectorSet) Close() {
	all := &Connectors{Conns: map[string]hypervisor.Connector{}}
	for name, oc := range cs.open {
		all.Conns[name] = oc.conn
	}
	for i, c := range cs.retired {
		all.Conns[fmt.Sprintf("retired %d", i)] = c
	}
	all.Close()
	cs.open, cs.retired = nil, nil
}

type openConnector struct {
	definition string // kind and options, as YAML
	conn       hypervisor.Connector
	storage    hypervisor.StorageSnapshotter
}

// update opens what the scheduled policies of cfg need and returns the
// Connectors for the engine.
func (cs *ConnectorSet) Update(ctx context.Context, cfg *policy.Config) (*Connectors, error) {
	var names []string
	for _, p := range cfg.Policies {
		if p.Schedule != "" {
			names = append(names, p.ConnectionNames()...)
		}
	}
	out := &Connectors{Conns: map[string]hypervisor.Connector{}, Storage: map[string]hypervisor.StorageSnapshotter{}}
	next := map[string]openConnector{}
	opened := &Connectors{Conns: map[string]hypervisor.Connector{}} // by this update: closed again if it fails
	for _, name := range names {
		if _, done := next[name]; done {
			continue
		}
		c, _ := cfg.Connection(name) // checked: every policy's connection exists
		def := c.Kind + "\n"
		if c.Options.Kind != 0 {
			opts, err := yaml.Marshal(&c.Options)
			if err != nil {
				opened.Close()
				return nil, err
			}
			def += string(opts)
		}
		oc, ok := cs.open[name]
		if !ok || oc.definition != def {
			var err error
			if oc, err = cs.openOne(ctx, cfg, c); err != nil {
				opened.Close()
				return nil, err
			}
			oc.definition = def
			opened.Conns[name] = oc.conn
		}
		next[name] = oc
		out.Conns[name] = oc.conn
		if oc.storage != nil {
			out.Storage[name] = oc.storage
		}
	}
	cs.s.withProviders(cfg, out)
	for name, oc := range cs.open {
		if kept, ok := next[name]; !ok || kept.conn != oc.conn {
			cs.retired = append(cs.retired, oc.conn)
		}
	}
	cs.open = next
	return out, nil
}

// openOne opens connection c of cfg for the set. On a fleet's server
// the fleet follows whose it is at each call (WorkerConnections.Follow);
// the server's own connector is opened now only when no worker reaches
// it now, so that a connection the server cannot open fails the update
// as without a fleet. Only the connector's own storage snapshotter is
// kept: withProviders adds the section's.
func (cs *ConnectorSet) openOne(ctx context.Context, cfg *policy.Config, c policy.Connection) (openConnector, error) {
	own := func(ctx context.Context) (hypervisor.Connector, hypervisor.StorageSnapshotter, error) {
		one := &Connectors{Conns: map[string]hypervisor.Connector{}, Storage: map[string]hypervisor.StorageSnapshotter{}}
		conn, err := cs.s.openConnection(ctx, cfg, c.Name, one)
		return conn, one.Storage[c.Name], err
	}
	wc := cs.s.workerConnections()
	if wc == nil {
		conn, storage, err := own(ctx)
		return openConnector{conn: conn, storage: storage}, err
	}
	var oc openConnector
	if _, theirs, err := wc.StandIn(ctx, cfg, c.Name); err != nil {
		return oc, err
	} else if !theirs {
		if oc.conn, oc.storage, err = own(ctx); err != nil {
			return oc, err
		}
	}
	oc.conn = wc.Follow(cfg, c.Name, oc.conn, func(ctx context.Context) (hypervisor.Connector, error) {
		conn, _, err := own(ctx)
		return conn, err
	})
	return oc, nil
}
