package vsphere

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	vsession "github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// Where a vCenter connection reads disk data from (Config.ReadFrom).
const (
	// ReadFromHost (the default) reads each disk from the ESXi host that
	// runs the VM; a host coffer cannot reach is read through vCenter
	// instead, with a warning naming why.
	ReadFromHost = "host"
	// ReadFromHostOnly reads from the host or fails the disk.
	ReadFromHostOnly = "host-only"
	// ReadFromVCenter sends every byte through vCenter's /folder service,
	// which proxies it from a host: one more hop, and vCenter's CPU and
	// network become the bottleneck of every backup.
	ReadFromVCenter = "vcenter"
)

// hostRetry is how long a host that could not be used is read through
// vCenter before coffer tries it again.
const hostRetry = 5 * time.Minute

// hostDirect is the transport of a vCenter connection: a disk is read
// from the /folder service of the ESXi host that runs its VM, not through
// vCenter's, which would proxy every byte. Each request is authorised by
// a one-time vCenter service ticket for exactly that URL and method
// (SessionManager.AcquireGenericServiceTicket, sent as the
// vmware_cgi_ticket cookie), or by a session of the host's own when the
// connection names host credentials. Restores and memory files still go
// through vCenter.
type hostDirect struct {
	c       *Connector
	vcenter *DatastoreHTTP // ReadFromVCenter, and the fallback

	mu    sync.Mutex
	hosts map[string]*hostEndpoint // by HostSystem MoRef value

	// Bytes read per route, for the task log and benchmarks.
	hostBytes, vcenterBytes atomic.Int64
}

// hostEndpoint is how one host is reached.
type hostEndpoint struct {
	name, addr string
	sc         *soap.Client  // the host's HTTPS client
	login      *vim25.Client // a session of the host's own (host credentials), else nil: tickets
	err        error         // why the host cannot be used now
	failedAt   time.Time
}

func newHostDirect(c *Connector) *hostDirect {
	return &hostDirect{c: c, vcenter: &DatastoreHTTP{Client: c.client, Connections: c.cfg.ReadConnections},
		hosts: map[string]*hostEndpoint{}}
}

func (t *hostDirect) Name() string { return "datastore-https-host" }

// routedDisk is an open disk that says which way its bytes come.
type routedDisk struct {
	DiskData
	route   string // for the task log
	warning string // a fallback, for the point's warnings
}

// OpenDisk implements Transport.
func (t *hostDirect) OpenDisk(ctx context.Context, loc DiskLocation) (DiskData, error) {
	viaVC := func(route, warning string) (DiskData, error) {
		d, err := t.vcenter.OpenDisk(ctx, loc)
		if err != nil {
			return nil, err
		}
		d.(*httpDisk).counter = &t.vcenterBytes
		return &routedDisk{DiskData: d, route: route, warning: warning}, nil
	}
	if t.c.cfg.ReadFrom == ReadFromVCenter {
		return viaVC("through vCenter's datastore service (read-from: vcenter)", "")
	}
	d, ep, err := t.openOnHost(ctx, loc)
	if err == nil {
		how := "vCenter service tickets"
		if ep.login != nil {
			how = "a session of the host's own"
		}
		return &routedDisk{DiskData: d, route: fmt.Sprintf("from ESXi host %s (%s), authorised by %s", ep.name, ep.addr, how)}, nil
	}
	if t.c.cfg.ReadFrom == ReadFromHostOnly {
		return nil, fmt.Errorf("vsphere: %s: reading from the host failed (read-from: host-only): %w", loc.Descriptor, err)
	}
	return viaVC("through vCenter's datastore service (the host could not be used)",
		fmt.Sprintf("disk %s read through vCenter, not from its ESXi host: %v (set host-addresses, or read-from: vcenter to silence this)", loc.Descriptor, err))
}

// WriteDisk implements DiskWriter through vCenter: restores create VMs
// through vCenter, which picks the host.
func (t *hostDirect) WriteDisk(ctx context.Context, loc DiskLocation, src hypervisor.DiskSource) error {
	return t.vcenter.WriteDisk(ctx, loc, src)
}

// openOnHost opens the disk's flat extent on the host that runs its VM
// and reads its first byte, so an unreachable host, a refused ticket or a
// certificate that does not match shows now, not in the middle of a copy.
func (t *hostDirect) openOnHost(ctx context.Context, loc DiskLocation) (*httpDisk, *hostEndpoint, error) {
	if loc.Host == "" {
		return nil, nil, errors.New("the VM's host is not known")
	}
	flat, ok := flatExtent(loc.Descriptor)
	if !ok {
		return nil, nil, fmt.Errorf("%s is not a .vmdk descriptor", loc.Descriptor)
	}
	ep, err := t.endpoint(ctx, loc.Host)
	if err != nil {
		return nil, nil, err
	}
	// A host serves its own datastores without a datacenter path.
	u := &url.URL{Scheme: "https", Host: ep.addr, Path: "/folder/" + flat, RawQuery: url.Values{"dsName": {loc.Datastore}}.Encode()}
	d := &httpDisk{u: u, size: loc.Size, slots: make(chan struct{}, max(t.c.cfg.ReadConnections, 1)), counter: &t.hostBytes}
	var first atomic.Pointer[http.Cookie] // a ticket already acquired, used by the next request
	if ep.login == nil {
		d.ticket = func(ctx context.Context) (*http.Cookie, error) {
			if c := first.Swap(nil); c != nil {
				return c, nil
			}
			c, _, err := t.ticket(ctx, u)
			return c, err
		}
	}
	t.mu.Lock()
	d.sc = ep.sc
	t.mu.Unlock()
	if d.sc == nil {
		// Tickets carry the host's certificate thumbprint as vCenter knows
		// it: the first one sets up the host's client, then authorises
		// the first read.
		c, err := t.clientFromTicket(ctx, ep, u)
		if err != nil {
			return nil, nil, t.failed(ep, err)
		}
		first.Store(c)
		t.mu.Lock()
		d.sc = ep.sc
		t.mu.Unlock()
	}
	if _, err := probeSize(ctx, d); err != nil {
		return nil, nil, t.failed(ep, err)
	}
	return d, ep, nil
}

// failed records that a host could not be used; it is tried again after
// hostRetry.
func (t *hostDirect) failed(ep *hostEndpoint, err error) error {
	t.mu.Lock()
	ep.err, ep.failedAt = err, time.Now()
	t.mu.Unlock()
	return err
}

// endpoint resolves a host's address (and logs in to it with host
// credentials) once; a failed host is retried after hostRetry.
func (t *hostDirect) endpoint(ctx context.Context, host string) (*hostEndpoint, error) {
	t.mu.Lock()
	ep, ok := t.hosts[host]
	if ok && (ep.err == nil || time.Since(ep.failedAt) < hostRetry) {
		err := ep.err
		t.mu.Unlock()
		return ep, err
	}
	t.mu.Unlock()
	ep = &hostEndpoint{}
	err := t.resolve(ctx, host, ep)
	if err == nil && t.c.cfg.HostUser != "" {
		err = t.hostLogin(ctx, ep)
	}
	if err != nil {
		ep.err, ep.failedAt = err, time.Now()
	}
	t.mu.Lock()
	t.hosts[host] = ep
	t.mu.Unlock()
	return ep, err
}

// resolve finds where coffer reaches a host: the address the connection
// names for it, else its management address (the VMkernel interface
// tagged for management), else its inventory name (what vCenter itself
// connects to).
func (t *hostDirect) resolve(ctx context.Context, host string, ep *hostEndpoint) error {
	ref := types.ManagedObjectReference{Type: "HostSystem", Value: host}
	var h mo.HostSystem
	if err := property.DefaultCollector(t.c.client).RetrieveOne(ctx, ref, []string{"name"}, &h); err != nil {
		return fmt.Errorf("host %s: %w", host, err)
	}
	ep.name = h.Name
	if a := t.c.cfg.HostAddresses[h.Name]; a != "" {
		ep.addr = a
		return nil
	}
	ips, err := object.NewHostSystem(t.c.client, ref).ManagementIPs(ctx)
	if err == nil && len(ips) > 0 {
		ep.addr = ips[0].String()
		return nil
	}
	ep.addr = h.Name
	return nil
}

// newHostClient is an HTTPS client for the host, verified the way the
// connection verifies vCenter: a thumbprint pinned for the host (in
// host-thumbprints, or vouched for by vCenter in a ticket), else the CA
// file (hosts' certificates are usually signed by vCenter's CA), else the
// system's roots.
func (t *hostDirect) newHostClient(ep *hostEndpoint, thumbprint string) (*soap.Client, error) {
	if tp := t.c.cfg.HostThumbprints[ep.name]; tp != "" {
		thumbprint = tp
	}
	sc := soap.NewClient(&url.URL{Scheme: "https", Host: ep.addr, Path: "/sdk"}, t.c.cfg.Insecure)
	sc.DefaultTransport().MaxIdleConnsPerHost = 256
	sc.DefaultTransport().MaxIdleConns = 0
	if err := secureClient(sc, ep.addr, thumbprint, t.c.cfg.CAFile); err != nil {
		return nil, err
	}
	return sc, nil
}

// clientFromTicket sets up the host's client with the thumbprint a first
// ticket for u carries, and returns that ticket, still unused.
func (t *hostDirect) clientFromTicket(ctx context.Context, ep *hostEndpoint, u *url.URL) (*http.Cookie, error) {
	c, tp, err := t.ticket(ctx, u)
	if err != nil {
		return nil, err
	}
	sc, err := t.newHostClient(ep, tp)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	if ep.sc == nil {
		ep.sc = sc
	}
	t.mu.Unlock()
	return c, nil
}

// hostLogin opens a session of the host's own with the connection's host
// credentials; its cookie then authorises every range request.
func (t *hostDirect) hostLogin(ctx context.Context, ep *hostEndpoint) error {
	sc, err := t.newHostClient(ep, "")
	if err != nil {
		return err
	}
	vc, err := vim25.NewClient(ctx, sc)
	if err != nil {
		return fmt.Errorf("host %s at %s: %w", ep.name, ep.addr, err)
	}
	if vc.IsVC() {
		return fmt.Errorf("host %s at %s answers as a vCenter, not as an ESXi host", ep.name, ep.addr)
	}
	if err := vsession.NewManager(vc).Login(ctx, url.UserPassword(t.c.cfg.HostUser, t.c.cfg.HostPassword)); err != nil {
		return fmt.Errorf("login to host %s at %s as %s: %w", ep.name, ep.addr, t.c.cfg.HostUser, err)
	}
	ep.sc, ep.login = sc, vc
	return nil
}

// ticket asks vCenter for a one-time credential for a GET of u, and the
// host's certificate thumbprint as vCenter knows it.
func (t *hostDirect) ticket(ctx context.Context, u *url.URL) (*http.Cookie, string, error) {
	tk, err := t.c.sm.AcquireGenericServiceTicket(ctx, &types.SessionManagerHttpServiceRequestSpec{Url: u.String(), Method: "httpGet"})
	if err != nil {
		return nil, "", fmt.Errorf("service ticket for %s: %w", u.Host, err)
	}
	return &http.Cookie{Name: "vmware_cgi_ticket", Value: tk.Id}, tk.SslThumbprint, nil
}

// close logs out of the hosts coffer logged in to.
func (t *hostDirect) close(ctx context.Context) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, ep := range t.hosts {
		if ep.login != nil {
			_ = vsession.NewManager(ep.login).Logout(ctx)
		}
	}
}
