// Package qemu protects running QEMU/KVM virtual machines over QMP, without
// an agent in the guest: a point-in-time image of all disks by image
// fleecing (copy-before-write filter + snapshot-access node, every disk
// switched while the VM is stopped for a few milliseconds), changed block
// tracking with persistent dirty bitmaps handed over at the same instant,
// and reading through QEMU's own NBD server with coffer's NBD client.
//
// Production safety first: the copy-before-write filter is told to break
// the snapshot rather than fail guest writes when its temporary space runs
// out (the backup fails, the VM keeps running); every object coffer creates
// is named coffer-* and journalled before it is created, so a killed coffer
// leaves nothing behind after the next CleanupLeftovers.
//
// qemu-storage-daemon instances are protected like VMs through job-based
// fleecing (daemon.go); there, a full fleecing space fails the writer's
// write instead (QEMU 7.2's backup job has no on-cbw-error).
package qemu

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/qmp"
)

// Config is one QEMU connection: the monitors of the VMs on this host.
type Config struct {
	// Sockets are QMP socket paths or globs ("/run/coffer/vms/*.qmp").
	Sockets []string
	// StateDir holds the journal, fleecing overlays and NBD sockets. Put
	// fleecing space where running out cannot hurt production.
	StateDir string
	// Host names this hypervisor host for the job engine's limits.
	Host string
	// Connections is the number of parallel NBD connections per disk.
	Connections int
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

// Connector implements hypervisor.Connector for QEMU.
type Connector struct {
	cfg Config
	log *slog.Logger
	// One QMP client per monitor at a time: sessions hold it, inventory
	// and cleanup wait for it.
	mu       sync.Mutex
	monitors map[string]*sync.Mutex
	seen     map[string]string // VM ID -> the socket an inventory found it on
}

// New checks cfg and prepares the state directory.
func New(cfg Config) (*Connector, error) {
	if len(cfg.Sockets) == 0 {
		return nil, errors.New("qemu: no QMP sockets configured")
	}
	if cfg.StateDir == "" {
		return nil, errors.New("qemu: no state directory configured")
	}
	for _, d := range []string{"journal", "fleece"} {
		if err := os.MkdirAll(filepath.Join(cfg.StateDir, d), 0o700); err != nil {
			return nil, fmt.Errorf("qemu: state directory: %w", err)
		}
	}
	if cfg.Host == "" {
		cfg.Host, _ = os.Hostname()
	}
	if cfg.Connections <= 0 {
		cfg.Connections = 4
	}
	lg := cfg.Log
	if lg == nil {
		lg = slog.Default()
	}
	return &Connector{cfg: cfg, log: lg, monitors: map[string]*sync.Mutex{}, seen: map[string]string{}}, nil
}

// Kind implements hypervisor.Connector.
func (c *Connector) Kind() string { return "qemu" }

func (c *Connector) sockets() ([]string, error) {
	var out []string
	for _, s := range c.cfg.Sockets {
		m, err := filepath.Glob(s)
		if err != nil {
			return nil, fmt.Errorf("qemu: socket pattern %q: %w", s, err)
		}
		if m == nil && !strings.ContainsAny(s, "*?[") {
			m = []string{s}
		}
		out = append(out, m...)
	}
	sort.Strings(out)
	return out, nil
}

// monitor locks the monitor at path for exclusive use and dials it.
func (c *Connector) monitor(ctx context.Context, path string) (*qmp.Client, func(), error) {
	return c.lockMonitor(ctx, path, true)
}

// errMonitorBusy: another session of this process holds the monitor.
var errMonitorBusy = errors.New("qemu: monitor in use by another session")

// lockMonitor is monitor; without wait, a monitor another session of
// this process holds fails at once with errMonitorBusy.
func (c *Connector) lockMonitor(ctx context.Context, path string, wait bool) (*qmp.Client, func(), error) {
	c.mu.Lock()
	m := c.monitors[path]
	if m == nil {
		m = &sync.Mutex{}
		c.monitors[path] = m
	}
	c.mu.Unlock()
	if !wait {
		if !m.TryLock() {
			return nil, nil, errMonitorBusy
		}
	} else {
		m.Lock()
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cl, err := qmp.Dial(dctx, path)
	if err != nil {
		m.Unlock()
		// A monitor another client holds accepts the connection and
		// never greets: the dial's deadline passes, as the context's or
		// as the socket's read deadline, whichever fires first.
		timedOut := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded)
		if timedOut && ctx.Err() == nil {
			err = fmt.Errorf("%w: %v", hypervisor.ErrTransient, err)
		}
		return nil, nil, err
	}
	return cl, func() { _ = cl.Close(); m.Unlock() }, nil
}

var _ hypervisor.BusyLister = (*Connector)(nil)

// Inventory implements hypervisor.Connector: it waits for monitors other
// sessions of this process hold; a VM whose monitor does not answer is
// left out.
func (c *Connector) Inventory(ctx context.Context) ([]hypervisor.VM, error) {
	return c.inventory(ctx, true)
}

// InventoryNow implements hypervisor.BusyLister: a VM whose monitor
// another session holds (a backup, here or in another process: QEMU
// serves one QMP client at a time, and a second one waits for its
// greeting in vain) is listed as busy, named by its socket.
func (c *Connector) InventoryNow(ctx context.Context) ([]hypervisor.VM, error) {
	return c.inventory(ctx, false)
}

func (c *Connector) inventory(ctx context.Context, wait bool) ([]hypervisor.VM, error) {
	socks, err := c.sockets()
	if err != nil {
		return nil, err
	}
	var vms []hypervisor.VM
	for _, s := range socks {
		vm, err := c.describe(ctx, s, wait)
		switch {
		case err == nil:
			vms = append(vms, vm)
		case !wait && (errors.Is(err, errMonitorBusy) || errors.Is(err, hypervisor.ErrTransient)):
			vms = append(vms, hypervisor.VM{Busy: true, Host: c.cfg.Host, Tags: map[string]string{"qmp-socket": s}})
		default:
			c.log.Warn("qemu: VM not reachable", "socket", s, "err", err)
		}
	}
	return vms, nil
}

func (c *Connector) describe(ctx context.Context, sock string, wait bool) (hypervisor.VM, error) {
	cl, release, err := c.lockMonitor(ctx, sock, wait)
	if err != nil {
		return hypervisor.VM{}, err
	}
	defer release()
	info, err := queryVM(ctx, cl, sock)
	if err != nil {
		return hypervisor.VM{}, err
	}
	vm := info.inventory(c.cfg.Host)
	vm.GuestAgent = guestAgentRunning(ctx, cl, guestAgentPath(sock))
	c.mu.Lock()
	c.seen[vm.ID] = sock
	c.mu.Unlock()
	return vm, nil
}

// lookup finds the socket of a VM by ID, name or socket path.
func (c *Connector) lookup(ctx context.Context, ref hypervisor.VMRef) (string, error) {
	socks, err := c.sockets()
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	seen := c.seen[ref.ID]
	c.mu.Unlock()
	for _, s := range socks {
		// A storage daemon's ID names its socket, and a VM seen by an
		// inventory is looked up where it was: no inventory round, which
		// waits for the monitors other sessions hold (a group batch holds
		// its VMs' sessions open together, so it would wait for itself).
		// Snapshot checks the VM it finds there.
		if s == ref.ID || s == ref.Name || daemonIDPrefix+s == ref.ID || (ref.ID != "" && s == seen) {
			return s, nil
		}
	}
	vms, err := c.Inventory(ctx)
	if err != nil {
		return "", err
	}
	for _, vm := range vms {
		if (ref.ID != "" && vm.ID == ref.ID) || (ref.ID == "" && vm.Name == ref.Name) {
			return vm.Tags["qmp-socket"], nil
		}
	}
	return "", fmt.Errorf("%w: qemu VM %q", hypervisor.ErrNotFound, ref.Name+ref.ID)
}

// guestAgentPath is the guest agent socket next to a QMP socket:
// "qmp.sock" → "qga.sock", "vm1.qmp" → "vm1.qga".
func guestAgentPath(sock string) string {
	dir, base := filepath.Split(sock)
	if base == "qmp.sock" {
		return filepath.Join(dir, "qga.sock")
	}
	return filepath.Join(dir, strings.TrimSuffix(base, filepath.Ext(base))+".qga")
}

// guestAgentRunning reports whether the guest agent is up: whether the
// guest has opened the virtio-serial port behind the VM's chardev
// listening at path (QEMU's "frontend-open"). Why not ask the agent
// itself: a VM whose channel is configured but whose agent is not
// installed or not running accepts the connection and never answers, and
// every inventory would wait out a timeout for it, one VM after another
// (3 s per VM, twice per one-shot backup, before this). A socket at path
// that is no chardev of this VM is no agent of it either. Quiesced
// backups still talk to the agent, within the policy's quiesce timeout.
func guestAgentRunning(ctx context.Context, cl *qmp.Client, path string) bool {
	want, err := os.Stat(path)
	if err != nil {
		return false
	}
	var devs []struct {
		Filename     string `json:"filename"`
		FrontendOpen bool   `json:"frontend-open"`
	}
	if err := cl.Execute(ctx, "query-chardev", nil, &devs); err != nil {
		return false
	}
	for _, d := range devs {
		p, ok := chardevSocketPath(d.Filename)
		if !ok {
			continue
		}
		if p == path {
			return d.FrontendOpen
		}
		// The same socket spelled another way (a symlinked directory).
		if fi, err := os.Stat(p); err == nil && os.SameFile(fi, want) {
			return d.FrontendOpen
		}
	}
	return false
}

// chardevSocketPath is the socket path in query-chardev's filename of a
// unix socket chardev: "unix:PATH,server=on", "disconnected:unix:PATH,
// server=on", or with " <-> peer" while a client is connected.
func chardevSocketPath(filename string) (string, bool) {
	_, rest, ok := strings.Cut(filename, "unix:")
	if !ok {
		return "", false
	}
	if end := strings.IndexAny(rest, ", "); end >= 0 {
		rest = rest[:end]
	}
	return rest, rest != ""
}
