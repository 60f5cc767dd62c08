// Package libvirt protects the VMs a libvirt daemon manages (virsh hosts,
// Cockpit, OpenStack Nova, oVirt/OLVM), agentless and without touching the
// domain definitions: libvirt's own backup API in pull mode
// (virDomainBackupBegin) freezes all disks of a domain at one instant and
// exports them over NBD on a unix socket, and coffer's NBD client reads the
// allocated ranges, or the ranges a libvirt checkpoint marks dirty.
//
// Change tracking is libvirt's checkpoints, so it survives VM restarts on
// qcow2 and is visible to the administrator (virsh checkpoint-list). Each
// backup chain (policy and repository) has checkpoints of its own, named
// coffer-<chain>-..., so two policies writing to two repositories each read
// only what changed since their own last point. Every checkpoint and backup
// job coffer starts is journalled before it exists; CleanupLeftovers aborts
// a dead coffer's job and deletes exactly the checkpoints it journalled,
// never another one.
package libvirt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// DefaultURI is the local system daemon, as virsh connects by default as
// root.
const DefaultURI = "qemu:///system"

// Config is one libvirt connection.
type Config struct {
	// URI is a libvirt URI: qemu:///system (the local socket),
	// qemu:///session?socket=PATH. A URI naming another host
	// (qemu+ssh://host/system, qemu+tls://...) lists the domains, but
	// cannot back them up or restore onto it (RemoteHost): set Elsewhere.
	URI string
	// Elsewhere, when set, says why the hypervisor's disks cannot be
	// reached from this process (its URI is remote, and no worker runs
	// there): Snapshot, CreateVM and InstantStart return it before they
	// ask anything of libvirt, so no backup starts that would fail at
	// its first read.
	Elsewhere error
	// StateDir holds the journal and the NBD export sockets. The QEMU
	// processes libvirt runs must be able to create sockets in its
	// "sockets" subdirectory.
	StateDir string
	// Host names the hypervisor host for the engine's limits; "" asks
	// libvirt for its host name.
	Host string
	// Connections is the number of parallel NBD connections per disk.
	Connections int
	// CallTimeout bounds one libvirt call that has no timeout of its
	// own (inventory, lookups); snapshot steps use the request's timeouts.
	CallTimeout time.Duration
	Log         *slog.Logger // ChainExpiry is how long a backup chain may go without a backup
	// before its change tracking is removed (hypervisor.ChainExpiry);
	// 0 means hypervisor.DefaultChainExpiry, negative never.
	ChainExpiry time.Duration
	// Now is the clock chain expiry reads; nil means time.Now. Tests move
	// it forward instead of waiting.
	Now func() time.Time
}

// chainExpiry is the expiry to apply at this instant.
func (c *Connector) chainExpiry() hypervisor.ChainExpiry {
	return hypervisor.ExpiryOf(c.cfg.ChainExpiry, c.cfg.Now)
}

// Connector implements hypervisor.Connector for libvirt.
type Connector struct {
	cfg Config
	uri *url.URL
	log *slog.Logger

	mu sync.Mutex
	lv *golibvirt.Libvirt
	// One session per domain at a time: libvirt runs one backup job per
	// domain, and cleanup must not abort the job of a live session.
	domains map[string]*sync.Mutex
}

// New checks cfg and prepares the state directory; it does not connect.
func New(cfg Config) (*Connector, error) {
	if cfg.URI == "" {
		cfg.URI = DefaultURI
	}
	u, err := url.Parse(cfg.URI)
	if err != nil || u.Scheme == "" {
		return nil, fmt.Errorf("libvirt: URI %q is not a libvirt URI (like qemu:///system)", cfg.URI)
	}
	if cfg.StateDir == "" {
		return nil, errors.New("libvirt: no state directory configured")
	}
	for _, d := range []string{"journal", "sockets"} {
		if err := os.MkdirAll(filepath.Join(cfg.StateDir, d), 0o700); err != nil {
			return nil, fmt.Errorf("libvirt: state directory: %w", err)
		}
	}
	// QEMU, run by libvirt as its own user on most hosts, creates the NBD
	// socket and scratch files in "sockets"; it may pass through the state
	// directory but not list it, and coffer's journal stays private.
	if err := errors.Join(os.Chmod(cfg.StateDir, 0o711),
		os.Chmod(filepath.Join(cfg.StateDir, "sockets"), 0o777|os.ModeSticky)); err != nil {
		return nil, fmt.Errorf("libvirt: state directory: %w", err)
	}
	if cfg.Connections <= 0 {
		cfg.Connections = 4
	}
	if cfg.CallTimeout <= 0 {
		cfg.CallTimeout = time.Minute
	}
	lg := cfg.Log
	if lg == nil {
		lg = slog.Default()
	}
	return &Connector{cfg: cfg, uri: u, log: lg, domains: map[string]*sync.Mutex{}}, nil
}

// Kind implements hypervisor.Connector.
func (c *Connector) Kind() string { return "libvirt" }

// Close drops the connection to libvirt.
func (c *Connector) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lv == nil {
		return nil
	}
	err := c.lv.Disconnect()
	c.lv = nil
	return err
}

// client returns the connection to libvirt, dialling it when there is none
// or the last one dropped (libvirtd restarted).
func (c *Connector) client(ctx context.Context) (*golibvirt.Libvirt, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lv != nil && c.lv.IsConnected() {
		return c.lv, nil
	}
	lv, err := call(ctx, c.cfg.CallTimeout, "connect to "+c.cfg.URI, func() (*golibvirt.Libvirt, error) {
		return golibvirt.ConnectToURI(c.uri)
	})
	if err != nil {
		return nil, err
	}
	c.lv = lv
	return lv, nil
}

// call runs one libvirt RPC with a deadline: go-libvirt's calls take no
// context, and a hung libvirtd must fail the backup with a clear error, not
// hang it. A call that times out goes on in the background until libvirt
// answers or the connection drops.
func call[T any](ctx context.Context, limit time.Duration, what string, f func() (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := f()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return r.v, classify(what, r.err)
		}
		return r.v, nil
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("%w: libvirt: %s: no answer within %s: %v", hypervisor.ErrTransient, what, limit, context.Cause(ctx))
	}
}

// do is call for RPCs without a result.
func do(ctx context.Context, limit time.Duration, what string, f func() error) error {
	_, err := call(ctx, limit, what, func() (struct{}, error) { return struct{}{}, f() })
	return err
}

// classify wraps libvirt's errors in the hypervisor package's classes, so
// the engine knows which ones to retry.
func classify(what string, err error) error {
	var le golibvirt.Error
	if errors.As(err, &le) {
		switch golibvirt.ErrorNumber(le.Code) {
		case golibvirt.ErrNoDomain:
			return fmt.Errorf("%w: libvirt: %s: %v", hypervisor.ErrNotFound, what, err)
		case golibvirt.ErrOperationTimeout, golibvirt.ErrAgentUnresponsive, golibvirt.ErrAgentUnsynced:
			return fmt.Errorf("%w: libvirt: %s: %v", hypervisor.ErrTransient, what, err)
		}
		return fmt.Errorf("libvirt: %s: %w", what, err)
	}
	// Not libvirt's answer: the connection failed or dropped.
	return fmt.Errorf("%w: libvirt: %s: %v", hypervisor.ErrTransient, what, err)
}

// isLibvirtError reports whether err carries libvirt error code n.
func isLibvirtError(err error, n golibvirt.ErrorNumber) bool {
	var le golibvirt.Error
	return errors.As(err, &le) && golibvirt.ErrorNumber(le.Code) == n
}

// lockDomain serialises the sessions and cleanups of one domain within
// this process.
func (c *Connector) lockDomain(uuid string) func() {
	c.mu.Lock()
	m := c.domains[uuid]
	if m == nil {
		m = &sync.Mutex{}
		c.domains[uuid] = m
	}
	c.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// lookup finds a domain by UUID, else by name.
func (c *Connector) lookup(ctx context.Context, lv *golibvirt.Libvirt, ref hypervisor.VMRef) (golibvirt.Domain, error) {
	if ref.ID != "" {
		if u, err := parseUUID(ref.ID); err == nil {
			return call(ctx, c.cfg.CallTimeout, "look up domain "+ref.ID, func() (golibvirt.Domain, error) {
				return lv.DomainLookupByUUID(u)
			})
		}
	}
	if ref.Name == "" {
		return golibvirt.Domain{}, fmt.Errorf("%w: libvirt domain %q", hypervisor.ErrNotFound, ref.ID)
	}
	return call(ctx, c.cfg.CallTimeout, "look up domain "+ref.Name, func() (golibvirt.Domain, error) {
		return lv.DomainLookupByName(ref.Name)
	})
}
