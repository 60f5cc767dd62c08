package all

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/libvirt"
)

// libvirtConnectionOptions are the options of a `kind: libvirt` connection:
//
//	connections:
//	  - name: kvm2
//	    kind: libvirt
//	    options:
//	      uri: qemu:///system                  # the default: coffer runs on the host (a worker there, docs/14-workers.md)
//	      host: kvm2                           # default: libvirt's host name
//	      nbd-connections: 4
//	      state-dir: /var/lib/coffer/libvirt   # journal and NBD sockets (QEMU must reach sockets/)
//	      unused-chain-expiry: 35d             # drop a chain's checkpoints after 35 days without a backup ("never")
type libvirtConnectionOptions struct {
	URI            string `yaml:"uri"`
	Host           string `yaml:"host"`
	NBDConnections int    `yaml:"nbd-connections"`
	StateDir       string `yaml:"state-dir"`
	// UnusedChainExpiry: see chainExpiryOption.
	UnusedChainExpiry string `yaml:"unused-chain-expiry"`
}

// libvirtCannot is what libvirt's backup API cannot take, for policy check.
var libvirtCannot = map[hypervisor.SnapshotMode]string{
	hypervisor.WithMemory: "libvirt's backup API saves no memory state (a libvirt memory snapshot would rewrite the domain's disk chain); use crash-consistent, quiesced or suspend",
	hypervisor.AsIs:       "libvirt offers no storage-level (as-is) snapshots; use crash-consistent",
}

// libvirtOptions decodes and checks a connection's options without
// connecting, so a bad one is a configuration error before anything runs.
func libvirtOptions(cfg Config) (libvirtConnectionOptions, error) {
	var o libvirtConnectionOptions
	if err := cfg.DecodeOptions(&o); err != nil {
		return o, err
	}
	if o.URI != "" {
		if u, err := url.Parse(o.URI); err != nil || u.Scheme == "" {
			return o, fmt.Errorf("connection %s: options.uri %q is not a libvirt URI (like qemu:///system)", cfg.Name, o.URI)
		}
	}
	if o.NBDConnections < 0 {
		return o, fmt.Errorf("connection %s: options.nbd-connections must not be negative (0 means the default, 4)", cfg.Name)
	}
	if _, err := chainExpiryOption(cfg.Name, o.UnusedChainExpiry); err != nil {
		return o, err
	}
	return o, nil
}

func newLibvirtConnector(_ context.Context, cfg Config) (hypervisor.Connector, error) {
	o, err := libvirtOptions(cfg)
	if err != nil {
		return nil, api.WithClass(api.Invalid, err)
	}
	expiry, _ := chainExpiryOption(cfg.Name, o.UnusedChainExpiry) // checked above
	state := o.StateDir
	if state == "" {
		state = filepath.Join(cfg.StateDir, "libvirt")
	}
	return libvirt.New(libvirt.Config{URI: o.URI, StateDir: state, Host: o.Host, Connections: o.NBDConnections,
		ChainExpiry: expiry, Log: cfg.Logger, Elsewhere: libvirtElsewhere(cfg)})
}

// libvirtElsewhere refuses a connection whose URI names another host than
// this one (libvirt.RemoteHost): libvirt reaches the domains from anywhere,
// but the frozen disks are exported on that host only. A worker on that
// host reaches the connection, and the servers then never open it.
func libvirtElsewhere(cfg Config) error {
	o, err := libvirtOptions(cfg)
	if err != nil || o.URI == "" {
		return nil // Check says what is wrong; no URI is the local daemon
	}
	u, err := url.Parse(o.URI)
	if err != nil {
		return nil
	}
	self, _ := os.Hostname()
	host := libvirt.RemoteHost(u, self)
	if host == "" {
		return nil
	}
	return fmt.Errorf("connection %s's URI %s is remote: run a coffer worker on %s (coffer worker --reach-connections %s, see docs/14-workers.md), where the URI is %s",
		cfg.Name, u.Redacted(), host, cfg.Name, libvirt.LocalURI(u))
}
