// Package vsphere protects VMware vSphere VMs (vCenter or a single ESXi)
// through the vSphere API, without an agent in the guest: one coffer-named
// VM snapshot per backup, changed block tracking (CBT) for incrementals,
// disk data read through a pluggable Transport (HTTPS datastore file
// access with Range reads of the snapshot's frozen base extent is built
// in).
//
// Scale: the inventory is one property-collector call over one container
// view, and every vSphere task coffer waits for is tracked by one shared
// poller per connector (see tasks.go), never by one property collector per
// task, which stops scaling at about 64 in-flight tasks.
//
// Safety: every snapshot coffer creates is named "coffer-..." and
// journalled in the state directory before it is requested, so a killed
// coffer's snapshots are found and removed by CleanupLeftovers, and
// snapshots coffer did not create are never touched.
package vsphere

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	vsession "github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/tasktrack"
)

// Config is one vSphere connection.
type Config struct {
	// URL of the vCenter or ESXi SDK endpoint ("https://vc.example.com/sdk";
	// a bare host name is accepted).
	URL string
	// User and Password log in; PasswordFile is read when Password is empty
	// (first line, surrounding white space ignored).
	User, Password, PasswordFile string
	// Insecure skips TLS verification entirely. Verification is on by
	// default; prefer Thumbprint (the server certificate's SHA-256 or SHA-1
	// fingerprint, "AB:CD:...") or CAFile for self-signed certificates.
	Insecure   bool
	Thumbprint string
	CAFile     string
	// StateDir holds the snapshot journal (leftover cleanup after a kill).
	StateDir string
	// Timeouts are the defaults for snapshot operations; requests may
	// override them. Zero fields take DefaultTimeouts.
	Timeouts hypervisor.Timeouts
	// TaskPoll is how often the shared task poller asks for the state of
	// all pending tasks (default 250ms).
	TaskPoll time.Duration
	// Transport reads (and at restore, writes) disk data; nil means HTTPS
	// datastore file access through the same endpoint.
	Transport Transport
	// ReadConnections is the number of parallel range requests per disk
	// reader (default 4).
	ReadConnections int
	// ReadFrom says where a vCenter connection's backups read disk data
	// (hostread.go): ReadFromHost ("" too), ReadFromHostOnly or
	// ReadFromVCenter. A connection to an ESXi host reads from it anyway.
	ReadFrom string
	// HostUser and HostPassword (or HostPasswordFile) log in to the ESXi
	// hosts directly; without them each read carries a vCenter service
	// ticket.
	HostUser, HostPassword, HostPasswordFile string
	// HostAddresses maps a host's inventory name to the address (and
	// port) coffer reaches it at, where its management address is not
	// routable from coffer; HostThumbprints pins hosts' certificates by
	// inventory name.
	HostAddresses, HostThumbprints map[string]string
	// GuestUser and GuestPassword (or GuestPasswordFile) are the guest
	// account VMware Tools runs guest hooks as (guestops.go).
	GuestUser, GuestPassword, GuestPasswordFile string
	// DataMoverVM names the VM coffer itself runs in: the hot-add
	// transport (hotadd.go) attaches the snapshot's disks to it, and
	// MoverDevices finds them in its OS (default LinuxDevices).
	DataMoverVM  string
	MoverDevices DeviceFinder
	Log          *slog.Logger
}

// DefaultTimeouts suit large, busy datastores: creating a snapshot of a VM
// with many disks or with memory can take minutes, and removing one after a
// long backup consolidates everything written meanwhile.
var DefaultTimeouts = hypervisor.Timeouts{
	SnapshotCreate: 30 * time.Minute,
	SnapshotRemove: 2 * time.Hour,
	Quiesce:        15 * time.Minute,
	Setup:          5 * time.Minute,
}

// Connector implements hypervisor.Connector for vSphere.
type Connector struct {
	cfg       Config
	log       *slog.Logger
	client    *vim25.Client
	sm        *vsession.Manager
	tasks     *tasktrack.Tracker
	transport Transport
	hosts     *hostDirect // the default transport of a vCenter connection; nil otherwise
	stateID   string      // identifies this coffer installation in snapshot descriptions

	mu     sync.Mutex
	active map[string]bool   // VM MoRef values with a session of this process
	dcPath map[string]string // datastore name -> datacenter inventory path
}

// Kind implements hypervisor.Connector.
func (c *Connector) Kind() string { return "vsphere" }

// Client is the logged-in vSphere API client (for transports and tests).
func (c *Connector) Client() *vim25.Client { return c.client }

// Transport is how the connector moves disk bytes (a *HotAdd with a data mover).
func (c *Connector) Transport() Transport { return c.transport }

// InstantStateDir holds instant recoveries' journals (CleanupLeftovers).
func (c *Connector) InstantStateDir() string { return c.cfg.StateDir }

// New logs in and prepares the state directory.
func New(ctx context.Context, cfg Config) (*Connector, error) {
	if cfg.URL == "" {
		return nil, errors.New("vsphere: no URL configured")
	}
	if cfg.StateDir == "" {
		return nil, errors.New("vsphere: no state directory configured")
	}
	for _, d := range []string{journalDir(cfg.StateDir), hotAddDir(cfg.StateDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("vsphere: state directory: %w", err)
		}
	}
	stateID, err := loadStateID(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	u, err := soap.ParseURL(cfg.URL)
	if err != nil || u == nil {
		return nil, fmt.Errorf("vsphere: URL %q: %v", cfg.URL, err)
	}
	user, pass, err := credentials(cfg, u)
	if err != nil {
		return nil, err
	}
	u.User = nil
	sc := soap.NewClient(u, cfg.Insecure)
	// Hundreds of concurrent sessions share this client (SOAP calls and
	// range reads): keep their connections instead of Go's 2 per host.
	sc.DefaultTransport().MaxIdleConnsPerHost = 256
	sc.DefaultTransport().MaxIdleConns = 0 // no total cap (Go's default transport keeps 100)
	if err := secureClient(sc, u.Host, cfg.Thumbprint, cfg.CAFile); err != nil {
		return nil, err
	}
	vc, err := vim25.NewClient(ctx, sc)
	if err != nil {
		return nil, fmt.Errorf("vsphere: connect to %s: %w", u.Host, err)
	}
	sm := vsession.NewManager(vc)
	if err := sm.Login(ctx, url.UserPassword(user, pass)); err != nil {
		return nil, fmt.Errorf("vsphere: login to %s as %s: %w", u.Host, user, err)
	}
	if cfg.HostPassword, err = secondPassword("host", cfg.HostUser, cfg.HostPassword, cfg.HostPasswordFile); err != nil {
		return nil, err
	}
	if cfg.GuestPassword, err = secondPassword("guest", cfg.GuestUser, cfg.GuestPassword, cfg.GuestPasswordFile); err != nil {
		return nil, err
	}
	switch cfg.ReadFrom {
	case "", ReadFromHost, ReadFromHostOnly, ReadFromVCenter:
	default:
		return nil, fmt.Errorf("vsphere: read-from %q: host, host-only or vcenter", cfg.ReadFrom)
	}
	if cfg.TaskPoll <= 0 {
		cfg.TaskPoll = 250 * time.Millisecond
	}
	if cfg.ReadConnections <= 0 {
		cfg.ReadConnections = 4
	}
	cfg.Timeouts = mergeTimeouts(cfg.Timeouts, DefaultTimeouts)
	lg := cfg.Log
	if lg == nil {
		lg = slog.Default()
	}
	c := &Connector{cfg: cfg, log: lg, client: vc, sm: sm, stateID: stateID,
		active: map[string]bool{}, dcPath: map[string]string{}}
	c.tasks = tasktrack.New(vc, cfg.TaskPoll)
	c.transport = cfg.Transport
	if c.transport == nil {
		c.transport = &DatastoreHTTP{Client: vc, Connections: cfg.ReadConnections}
		if vc.IsVC() {
			c.hosts = newHostDirect(c)
			c.transport = c.hosts
		}
		if cfg.DataMoverVM != "" {
			c.transport = newHotAdd(c, c.transport.(DiskWriter))
		}
	}
	return c, nil
}

// Close stops the task poller and logs out.
func (c *Connector) Close(ctx context.Context) error {
	c.tasks.Stop()
	if c.hosts != nil {
		c.hosts.close(ctx)
	}
	return c.sm.Logout(ctx)
}

// secureClient sets up how sc verifies the server host: a pinned
// thumbprint (checked in the first handshake: govmomi would first try,
// and fail, normal verification, doubling every TLS setup), a private CA,
// or both; with neither, the system's roots.
func secureClient(sc *soap.Client, host, thumbprint, caFile string) error {
	if thumbprint != "" {
		tp := normalizeThumbprint(thumbprint)
		sc.SetThumbprint(host, tp)
		if caFile == "" {
			tc := sc.DefaultTransport().TLSClientConfig
			tc.InsecureSkipVerify = true
			tc.VerifyConnection = func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 {
					return errors.New("vsphere: server sent no certificate")
				}
				leaf := cs.PeerCertificates[0]
				if soap.ThumbprintSHA256(leaf) != tp && soap.ThumbprintSHA1(leaf) != tp {
					return fmt.Errorf("vsphere: host %s thumbprint does not match %s", host, tp)
				}
				return nil
			}
		}
	}
	if caFile != "" {
		if err := sc.SetRootCAs(caFile); err != nil {
			return fmt.Errorf("vsphere: CA file: %w", err)
		}
	}
	return nil
}

// credentials picks the user and password: explicit fields, then the
// password file, then the URL's user info.
func credentials(cfg Config, u *url.URL) (string, string, error) {
	user, pass := cfg.User, cfg.Password
	if u.User != nil {
		if user == "" {
			user = u.User.Username()
		}
		if p, ok := u.User.Password(); ok && pass == "" && cfg.PasswordFile == "" {
			pass = p
		}
	}
	if pass == "" && cfg.PasswordFile != "" {
		b, err := os.ReadFile(cfg.PasswordFile)
		if err != nil {
			return "", "", fmt.Errorf("vsphere: password file: %w", err)
		}
		pass = strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
	}
	if user == "" || pass == "" {
		return "", "", errors.New("vsphere: a user and a password (or password file) are required")
	}
	return user, pass, nil
}

// secondPassword reads the password of the host or guest account from
// its file when it is not given (first line, surrounding white space
// ignored).
func secondPassword(what, user, pass, file string) (string, error) {
	if user == "" || pass != "" {
		return pass, nil
	}
	if file == "" {
		return "", fmt.Errorf("vsphere: %s-user needs %s-password-file", what, what)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("vsphere: %s password file: %w", what, err)
	}
	return strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]), nil
}

// normalizeThumbprint accepts "ab:cd:..", "AB CD ..", or plain hex.
func normalizeThumbprint(s string) string {
	s = strings.ToUpper(strings.NewReplacer(" ", "", ":", "", "-", "").Replace(s))
	var parts []string
	for i := 0; i+2 <= len(s); i += 2 {
		parts = append(parts, s[i:i+2])
	}
	return strings.Join(parts, ":")
}

func mergeTimeouts(t, def hypervisor.Timeouts) hypervisor.Timeouts {
	if t.SnapshotCreate <= 0 {
		t.SnapshotCreate = def.SnapshotCreate
	}
	if t.SnapshotRemove <= 0 {
		t.SnapshotRemove = def.SnapshotRemove
	}
	if t.Quiesce <= 0 {
		t.Quiesce = def.Quiesce
	}
	if t.Setup <= 0 {
		t.Setup = def.Setup
	}
	return t
}

// claim marks a VM as having a session in this process: exactly one coffer
// snapshot per VM at a time.
func (c *Connector) claim(moref string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.active[moref] {
		return false
	}
	c.active[moref] = true
	return true
}

func (c *Connector) unclaim(moref string) {
	c.mu.Lock()
	delete(c.active, moref)
	c.mu.Unlock()
}

// loadStateID returns the random identity of this state directory, written
// into every snapshot's description so that cleanup only ever removes
// snapshots made by this coffer installation.
func loadStateID(dir string) (string, error) {
	p := filepath.Join(dir, "id")
	if b, err := os.ReadFile(p); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	id := hex.EncodeToString(b[:])
	if err := os.WriteFile(p, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("vsphere: state id: %w", err)
	}
	return id, nil
}
