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

// connectors are hypervisor connections opened for one operation.
type connectors struct {
	conns   map[string]hypervisor.Connector
	storage map[string]hypervisor.StorageSnapshotter
	// borrowed: the server's engine's connectors (servingEngine), which
	// stay open when the operation that borrowed them ends.
	borrowed bool
}

// close ends the sessions of connectors opened for one operation (a
// vSphere login, a libvirt connection), so that a server listing,
// planning, backing up or restoring on request does not pile sessions up
// on vCenter or libvirtd.
func (c *connectors) close() {
	if c.borrowed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, conn := range c.conns {
		switch conn := conn.(type) {
		case interface{ Close(context.Context) error }:
			_ = conn.Close(ctx)
		case interface{ Close() error }:
			_ = conn.Close()
		}
	}
}

// openConnectors builds the named connections of cfg. A connector that
// offers storage-level snapshots (a StorageSnapshotter method) is in the
// storage map too.
func (s *Service) openConnectors(ctx context.Context, cfg *policy.Config, names []string) (*connectors, error) {
	out := &connectors{conns: map[string]hypervisor.Connector{}, storage: map[string]hypervisor.StorageSnapshotter{}}
	for _, name := range names {
		if _, done := out.conns[name]; done {
			continue
		}
		cc, ok := connection(cfg, name)
		if !ok {
			return nil, invalidf("no connection named %q in the configuration", name)
		}
		kind, ok := hvall.Lookup(cc.Kind)
		if !ok {
			return nil, invalidf("%v", hvall.UnknownKind(name, cc.Kind))
		}
		c, err := kind.Open(ctx, hvall.Config{Connection: cc, StateDir: s.cfg.StateDir, Logger: s.log})
		if err != nil {
			return nil, fmt.Errorf("connection %s: %w", name, err)
		}
		out.conns[name] = c
		if st, ok := c.(interface {
			StorageSnapshotter() hypervisor.StorageSnapshotter
		}); ok && kind.StorageSnapshots {
			out.storage[name] = st.StorageSnapshotter()
		}
	}
	s.withProviders(cfg, out)
	return out, nil
}

// withProviders puts the storage-snapshots section's providers in place
// of a connector's own for the connections they cover. It is built anew
// from each configuration: a changed section takes effect at a reload
// even when the connection's definition did not change.
func (s *Service) withProviders(cfg *policy.Config, out *connectors) {
	for name, sp := range storagesnap.For(cfg.StorageSnapshots, s.cfg.StateDir, s.log) {
		if _, used := out.conns[name]; used {
			out.storage[name] = sp
		}
	}
}

func connection(cfg *policy.Config, name string) (policy.Connection, bool) {
	for _, c := range cfg.Connections {
		if c.Name == name {
			return c, true
		}
	}
	return policy.Connection{}, false
}

// connectorSet keeps the connections the server opened across reloads of
// the configuration: a connection whose definition did not change keeps
// its connector (jobs old and new share it), a new or changed one is
// opened, and one no scheduled policy uses is dropped.
type connectorSet struct {
	s    *Service
	open map[string]openConnector
	// retired were dropped or replaced by a reload. Jobs started before
	// it run on with them (a job keeps the engine setup it started
	// with), so they are closed with the set, when the server stops, as
	// the engine closes the repositories a reload retired.
	retired []hypervisor.Connector
}

// close ends the sessions of every connector the set opened.
func (cs *connectorSet) close() {
	all := &connectors{conns: map[string]hypervisor.Connector{}}
	for name, oc := range cs.open {
		all.conns[name] = oc.conn
	}
	for i, c := range cs.retired {
		all.conns[fmt.Sprintf("retired %d", i)] = c
	}
	all.close()
	cs.open, cs.retired = nil, nil
}

type openConnector struct {
	definition string // kind and options, as YAML
	conn       hypervisor.Connector
	storage    hypervisor.StorageSnapshotter
}

// update opens what the scheduled policies of cfg need and returns the
// connectors for the engine.
func (cs *connectorSet) update(ctx context.Context, cfg *policy.Config) (*connectors, error) {
	var names []string
	for _, p := range cfg.Policies {
		if p.Schedule != "" {
			names = append(names, p.ConnectionNames()...)
		}
	}
	out := &connectors{conns: map[string]hypervisor.Connector{}, storage: map[string]hypervisor.StorageSnapshotter{}}
	next := map[string]openConnector{}
	opened := &connectors{conns: map[string]hypervisor.Connector{}} // by this update: closed again if it fails
	for _, name := range names {
		if _, done := next[name]; done {
			continue
		}
		c, _ := connection(cfg, name) // checked: every policy's connection exists
		def := c.Kind + "\n"
		if c.Options.Kind != 0 {
			opts, err := yaml.Marshal(&c.Options)
			if err != nil {
				opened.close()
				return nil, err
			}
			def += string(opts)
		}
		oc, ok := cs.open[name]
		if !ok || oc.definition != def {
			one, err := cs.s.openConnectors(ctx, cfg, []string{name})
			if err != nil {
				opened.close()
				return nil, err
			}
			oc = openConnector{definition: def, conn: one.conns[name]}
			opened.conns[name] = oc.conn
			// Only the connector's own: withProviders adds the section's.
			if st, ok := oc.conn.(interface {
				StorageSnapshotter() hypervisor.StorageSnapshotter
			}); ok && kindOf(c.Kind).StorageSnapshots {
				oc.storage = st.StorageSnapshotter()
			}
		}
		next[name] = oc
		out.conns[name] = oc.conn
		if oc.storage != nil {
			out.storage[name] = oc.storage
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
