package all

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
)

// qemuConnectionOptions are the options of a `kind: qemu` connection:
//
//	connections:
//	  - name: kvm1
//	    kind: qemu
//	    options:
//	      sockets: ["/run/coffer/vms/*.qmp"]
//	      host: kvm1
//	      nbd-connections: 4
//	      state-dir: /var/lib/coffer/qemu   # fleecing overlays go here
//	      unused-chain-expiry: 35d          # drop a chain's bitmaps after 35 days without a backup ("never")
type qemuConnectionOptions struct {
	Sockets        []string `yaml:"sockets"`
	Host           string   `yaml:"host"`
	NBDConnections int      `yaml:"nbd-connections"`
	StateDir       string   `yaml:"state-dir"`
	// UnusedChainExpiry: see chainExpiryOption.
	UnusedChainExpiry string `yaml:"unused-chain-expiry"`
}

// qemuOptions decodes and checks a connection's options without touching
// any VM, so a bad one is a configuration error before anything runs.
func qemuOptions(cfg Config) (qemuConnectionOptions, error) {
	var o qemuConnectionOptions
	if err := cfg.DecodeOptions(&o); err != nil {
		return o, err
	}
	if len(o.Sockets) == 0 {
		return o, fmt.Errorf("connection %s: options.sockets lists no QMP sockets", cfg.Name)
	}
	if o.NBDConnections < 0 {
		return o, fmt.Errorf("connection %s: options.nbd-connections must not be negative (0 means the default, 4)", cfg.Name)
	}
	if _, err := chainExpiryOption(cfg.Name, o.UnusedChainExpiry); err != nil {
		return o, err
	}
	return o, nil
}

func newQEMUConnector(_ context.Context, cfg Config) (hypervisor.Connector, error) {
	o, err := qemuOptions(cfg)
	if err != nil {
		return nil, api.WithClass(api.Invalid, err)
	}
	expiry, _ := chainExpiryOption(cfg.Name, o.UnusedChainExpiry) // checked above
	state := o.StateDir
	if state == "" {
		// The same directory `coffer backup vm` uses, so either finds and
		// cleans the other's leftovers.
		state = filepath.Join(cfg.StateDir, "qemu")
	}
	return qemu.New(qemu.Config{Sockets: o.Sockets, StateDir: state, Host: o.Host,
		Connections: o.NBDConnections, ChainExpiry: expiry, Log: cfg.Logger})
}
