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
)

// Where a vCenter connection reads disk data from, and writes restored
// disks to (Config.ReadFrom).
const (
	// ReadFromHost (the default) reads each disk (and memory file) from
	// the ESXi host that runs the VM, and writes a restored disk to the
	// host the new VM is registered on; a host coffer cannot use is
	// passed over for vCenter, with a warning naming why.
	ReadFromHost = "host"
	// ReadFromHostOnly uses the host or fails the disk.
	ReadFromHostOnly = "host-only"
	// ReadFromVCenter sends every byte through vCenter's /folder service,
	// which proxies it from a host: one more hop, and vCenter's CPU and
	// network become the bottleneck of every backup.
	ReadFromVCenter = "vcenter"
)

// hostRetry is how long a host that could not be used is passed over
// for vCenter before coffer tries it again.
const hostRetry = 5 * time.Minute

// hostDirect is the transport of a vCenter connection: a disk is read
// from, and at restore written to, the /folder service of the ESXi host
// that runs its VM, not vCenter's, which would proxy every byte; so are a
// with-memory snapshot's memory files (hostmemory.go). Each request is
// authorised by a one-time vCenter service ticket for exactly that URL and
// method (SessionManager.AcquireGenericServiceTicket, sent as the
// vmware_cgi_ticket cookie), or by a session of the host's own when the
// connection names host credentials. Which way the bytes go is chosen per
// file by route (Config.ReadFrom).
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

// authorisedBy names, for the task log, what lets coffer in.
func (ep *hostEndpoint) authorisedBy() string {
	if ep.login != nil {
		return "a session of the host's own"
	}
	return "vCenter service tickets"
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

// routed is the way one file's bytes went, and the warning of a fallback.
type routed struct{ route, warning string }

// direction words the task log and errors for reads and for writes.
type direction struct{ gerund, past, prep string }

var (
	reading = direction{"reading from", "read", "from"}
	writing = direction{"writing to", "written", "to"}
)

// route moves one file's bytes the way the connection's read-from says:
// with ReadFromVCenter through vCenter (viaVC); else through the ESXi host
// (onHost, given the host's endpoint), and when the host cannot be used
// through vCenter with a warning (ReadFromHost) or not at all
// (ReadFromHostOnly). what names the file in errors and warnings. A
// cancelled request never falls back.
func (t *hostDirect) route(ctx context.Context, what string, dir direction, host string,
	onHost func(*hostEndpoint) error, viaVC func() error) (routed, error) {
	if t.c.cfg.ReadFrom == ReadFromVCenter {
		if err := viaVC(); err != nil {
			return routed{}, err
		}
		return routed{route: "through vCenter's datastore service (read-from: vcenter)"}, nil
	}
	ep, err := t.useHost(ctx, host, onHost)
	if err == nil {
		return routed{route: fmt.Sprintf("%s ESXi host %s (%s), authorised by %s", dir.prep, ep.name, ep.addr, ep.authorisedBy())}, nil
	}
	if ctx.Err() != nil {
		return routed{}, err
	}
	if t.c.cfg.ReadFrom == ReadFromHostOnly {
		return routed{}, fmt.Errorf("vsphere: %s: %s the host failed (read-from: host-only): %w", what, dir.gerund, err)
	}
	if err := viaVC(); err != nil {
		return routed{}, err
	}
	return routed{route: "through vCenter's datastore service (the host could not be used)",
		warning: fmt.Sprintf("%s %s through vCenter, not %s its ESXi host: %v (host-addresses says where coffer reaches a host; read-from: vcenter silences this)",
			what, dir.past, dir.prep, err)}, nil
}

// useHost runs on with the endpoint of host; a host that fails is passed
// over for hostRetry.
func (t *hostDirect) useHost(ctx context.Context, host string, on func(*hostEndpoint) error) (*hostEndpoint, error) {
	if host == "" {
		return nil, errors.New("the VM's host is not known")
	}
	ep, err := t.endpoint(ctx, host)
	if err != nil {
		return nil, err
	}
	if err := on(ep); err != nil {
		return nil, t.failed(ep, err)
	}
	return ep, nil
}

// OpenDisk implements Transport.
func (t *hostDirect) OpenDisk(ctx context.Context, loc DiskLocation) (DiskData, error) {
	flat, ok := flatExtent(loc.Descriptor)
	if !ok {
		return nil, fmt.Errorf("vsphere: %s is not a .vmdk descriptor", loc.Descriptor)
	}
	var d DiskData
	r, err := t.route(ctx, "disk "+loc.Descriptor, reading, loc.Host,
		func(ep *hostEndpoint) error {
			hd, err := t.openOnHost(ctx, ep, loc.Datastore, flat, loc.Size)
			d = hd
			return err
		},
		func() error {
			vd, err := t.vcenter.OpenDisk(ctx, loc)
			if err == nil {
				vd.(*httpDisk).counter = &t.vcenterBytes
			}
			d = vd
			return err
		})
	if err != nil {
		return nil, err
	}
	return &routedDisk{DiskData: d, route: r.route, warning: r.warning}, nil
}

// hostURL is a file's /folder URL on a host, which serves its own
// datastores without a datacenter path.
func hostURL(ep *hostEndpoint, datastore, path string) *url.URL {
	return &url.URL{Scheme: "https", Host: ep.addr, Path: "/folder/" + path, RawQuery: url.Values{"dsName": {datastore}}.Encode()}
}

// openOnHost opens a datastore file on a host for range reads and reads
// its first byte, so an unreachable host, a refused ticket or a
// certificate that does not match shows now, not in the middle of a copy.
// A size below 0 is taken from the file (memory files).
func (t *hostDirect) openOnHost(ctx context.Context, ep *hostEndpoint, datastore, path string, size int64) (*httpDisk, error) {
	u := hostURL(ep, datastore, path)
	d := &httpDisk{ctx: ctx, u: u, size: size, slots: make(chan struct{}, max(t.c.cfg.ReadConnections, 1)), counter: &t.hostBytes}
	var first atomic.Pointer[http.Cookie] // a ticket already acquired, used by the next request
	if ep.login == nil {
		d.ticket = func(ctx context.Context) (*http.Cookie, error) {
			if c := first.Swap(nil); c != nil {
				return c, nil
			}
			c, _, err := t.ticket(ctx, u, types.SessionManagerHttpServiceRequestSpecMethodHttpGet)
			return c, err
		}
	}
	sc, c, err := t.hostClient(ctx, ep, u, types.SessionManagerHttpServiceRequestSpecMethodHttpGet)
	if err != nil {
		return nil, err
	}
	d.sc = sc
	if c != nil {
		first.Store(c)
	}
	n, err := probeSize(ctx, d)
	if err != nil {
		return nil, err
	}
	if size < 0 {
		d.size = n
	}
	return d, nil
}

// hostClient returns the host's HTTPS client. Tickets carry the host's
// certificate thumbprint as vCenter knows it: the first use of a host
// without a login asks for a ticket for method on u, sets up the client
// with it, and returns that ticket, still unused, to authorise the
// request.
func (t *hostDirect) hostClient(ctx context.Context, ep *hostEndpoint, u *url.URL, method types.SessionManagerHttpServiceRequestSpecMethod) (*soap.Client, *http.Cookie, error) {
	t.mu.Lock()
	sc := ep.sc
	t.mu.Unlock()
	if sc != nil {
		return sc, nil, nil
	}
	c, err := t.clientFromTicket(ctx, ep, u, method)
	if err != nil {
		return nil, nil, err
	}
	t.mu.Lock()
	sc = ep.sc
	t.mu.Unlock()
	return sc, c, nil
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
// ticket for method on u carries, and returns that ticket, still unused.
func (t *hostDirect) clientFromTicket(ctx context.Context, ep *hostEndpoint, u *url.URL, method types.SessionManagerHttpServiceRequestSpecMethod) (*http.Cookie, error) {
	c, tp, err := t.ticket(ctx, u, method)
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

// ticket asks vCenter for a one-time credential for one request (method
// on u), and the host's certificate thumbprint as vCenter knows it.
func (t *hostDirect) ticket(ctx context.Context, u *url.URL, method types.SessionManagerHttpServiceRequestSpecMethod) (*http.Cookie, string, error) {
	tk, err := t.c.sm.AcquireGenericServiceTicket(ctx, &types.SessionManagerHttpServiceRequestSpec{Url: u.String(), Method: string(method)})
	if err != nil {
		return nil, "", fmt.Errorf("vCenter gave no service ticket for %s on %s: %w", method, u.Host, err)
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
