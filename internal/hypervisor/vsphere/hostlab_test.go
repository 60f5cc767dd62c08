package vsphere

import (
	"bytes"
	"crypto/tls"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// endpointProxy stands in front of a simulator as the address coffer
// talks to, and counts what its /folder service serves. vcsim checks no
// authentication on /folder, so the proxy does what vCenter and ESXi do:
// a /folder request must carry a session cookie the simulator issued
// (vCenter, or a host login) or a one-time service ticket vCenter issued
// for exactly that URL and method.
type endpointProxy struct {
	server *httptest.Server
	url    *url.URL
	thumb  string

	// folderBytes counts what /folder serves (reads), folderUploaded
	// what it is sent (restores' PUTs).
	folderBytes, folderUploaded, folderRequests, refused atomic.Int64
	// refusePutTickets: a host that does not take tickets for uploads.
	refusePutTickets atomic.Bool
	// denyPutTickets: a vCenter that issues no tickets for uploads (an
	// account without the privilege), answering with NoPermission.
	denyPutTickets atomic.Bool

	mu       sync.Mutex
	sessions map[string]bool // vmware_soap_session values this simulator set
	tickets  *ticketBook     // tickets vCenter issued; nil: tickets not accepted here
	used     int             // tickets presented and accepted here
}

// ticketBook is what the vCenter proxy saw vCenter issue.
type ticketBook struct {
	mu     sync.Mutex
	issued map[string]string // ticket id -> "method url" it was issued for
	count  int
}

var (
	specURL    = regexp.MustCompile(`<url>([^<]*)</url>`)
	specMethod = regexp.MustCompile(`<method>([^<]*)</method>`)
	ticketID   = regexp.MustCompile(`<id>([^<]*)</id>`)
)

// newEndpointProxy proxies backend. book, when set, is filled with the
// tickets this endpoint (a vCenter) issues (issuer) or is checked
// against (a host).
func newEndpointProxy(t testing.TB, backend *url.URL, book *ticketBook, issuer bool) *endpointProxy {
	p := &endpointProxy{sessions: map[string]bool{}}
	if !issuer {
		p.tickets = book
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: backend.Scheme, Host: backend.Host})
	rp.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} // the test's own simulator
	rp.ModifyResponse = func(res *http.Response) error {
		for _, c := range res.Cookies() {
			if c.Name == "vmware_soap_session" {
				p.mu.Lock()
				p.sessions[c.Value] = true
				p.mu.Unlock()
			}
		}
		if issuer && res.Request.Header.Get("X-Test-Ticket-For") != "" {
			body, err := io.ReadAll(res.Body)
			if err != nil {
				return err
			}
			res.Body = io.NopCloser(bytes.NewReader(body))
			if m := ticketID.FindSubmatch(body); m != nil {
				book.mu.Lock()
				book.issued[string(m[1])] = res.Request.Header.Get("X-Test-Ticket-For")
				book.count++
				book.mu.Unlock()
			}
		}
		if len(res.Request.URL.Path) > 8 && res.Request.URL.Path[:8] == "/folder/" {
			res.Body = &countingBody{ReadCloser: res.Body, n: &p.folderBytes}
		}
		return nil
	}
	p.server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && len(r.URL.Path) >= 4 && r.URL.Path[len(r.URL.Path)-4:] == "/sdk" {
			body, _ := io.ReadAll(r.Body)
			if issuer && bytes.Contains(body, []byte("AcquireGenericServiceTicket")) {
				u, m := specURL.FindSubmatch(body), specMethod.FindSubmatch(body)
				if m != nil && string(m[1]) == "httpPut" && p.denyPutTickets.Load() {
					w.Header().Set("Content-Type", "text/xml; charset=utf-8")
					w.WriteHeader(http.StatusInternalServerError)
					io.WriteString(w, noPermissionFault)
					return
				}
				if u != nil && m != nil {
					r.Header.Set("X-Test-Ticket-For", string(m[1])+" "+html.UnescapeString(string(u[1])))
				}
			}
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		if len(r.URL.Path) > 8 && r.URL.Path[:8] == "/folder/" {
			p.folderRequests.Add(1)
			if !p.authorised(r) {
				p.refused.Add(1)
				http.Error(w, "not authenticated", http.StatusUnauthorized)
				return
			}
			r.Body = &countingBody{ReadCloser: r.Body, n: &p.folderUploaded}
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(p.server.Close)
	p.url, _ = url.Parse(p.server.URL + backend.Path)
	p.thumb = soap.ThumbprintSHA256(p.server.Certificate())
	return p
}

// authorised: a session cookie of this endpoint, or an unused ticket
// issued for this very request (used up by it).
func (p *endpointProxy) authorised(r *http.Request) bool {
	if c, err := r.Cookie("vmware_soap_session"); err == nil {
		p.mu.Lock()
		ok := p.sessions[c.Value]
		p.mu.Unlock()
		if ok {
			return true
		}
	}
	c, err := r.Cookie("vmware_cgi_ticket")
	if err != nil || p.tickets == nil || (r.Method == http.MethodPut && p.refusePutTickets.Load()) {
		return false
	}
	want := ticketMethods[r.Method] + " https://" + r.Host + r.URL.RequestURI()
	p.tickets.mu.Lock()
	defer p.tickets.mu.Unlock()
	if p.tickets.issued[c.Value] != want {
		return false
	}
	delete(p.tickets.issued, c.Value) // one-time
	p.mu.Lock()
	p.used++
	p.mu.Unlock()
	return true
}

// noPermissionFault is vCenter's answer to a call the account lacks a
// privilege for.
const noPermissionFault = `<?xml version="1.0" encoding="UTF-8"?>
<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<soapenv:Body><soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>Permission to perform this operation was denied.</faultstring>
<detail><NoPermissionFault xmlns="urn:vim25" xsi:type="NoPermission"><object type="Folder">group-d1</object><privilegeId>Datastore.FileManagement</privilegeId></NoPermissionFault></detail>
</soapenv:Fault></soapenv:Body></soapenv:Envelope>`

// ticketMethods names an HTTP method as a ticket's spec does.
var ticketMethods = map[string]string{http.MethodGet: "httpGet", http.MethodPut: "httpPut"}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// hostLab is a vCenter simulator with one host, one datastore and one VM,
// and a second simulator in ESX mode playing that host: its datastore is
// the vCenter simulator's datastore directory (the shared storage a real
// host mounts), so it serves the same files. Both sit behind counting
// proxies.
type hostLab struct {
	s          *sim
	vc, host   *endpointProxy
	book       *ticketBook
	hostName   string
	esxUser    string
	esxPass    string
	vm         types.ManagedObjectReference
	data       []byte
	flatOnDisk string
}

func startHostLab(t *testing.T, diskSize int64) *hostLab {
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 1, DiskSize: diskSize})
	l := &hostLab{s: s, vm: s.vms[0], esxUser: "root", esxPass: "esx-s3cret", book: &ticketBook{issued: map[string]string{}}}
	var hosts []mo.HostSystem
	if err := s.pc().Retrieve(t.Context(), s.find(t.Context(), "HostSystem"), []string{"name"}, &hosts); err != nil || len(hosts) != 1 {
		t.Fatalf("hosts %v: %v", hosts, err)
	}
	l.hostName = hosts[0].Name

	esx := simulator.ESX()
	if err := esx.Create(); err != nil {
		t.Fatal(err)
	}
	var dsDir string
	for name, dir := range s.dsDirs {
		if name != "LocalDS_0" {
			t.Fatalf("datastore %s: the ESX simulator has LocalDS_0 only", name)
		}
		dsDir = dir
	}
	esxDS := esx.Map().Any("Datastore").(*simulator.Datastore)
	esxDS.Summary.Url = dsDir
	esx.Service.TLS = new(tls.Config)
	esx.Service.Listen = &url.URL{User: url.UserPassword(l.esxUser, l.esxPass)}
	esxServer := esx.Service.NewServer()
	t.Cleanup(func() { esxServer.Close(); esx.Remove() })

	l.vc = newEndpointProxy(t, s.url, l.book, true)
	l.host = newEndpointProxy(t, esxServer.URL, l.book, false)

	l.flatOnDisk = s.flatPath("LocalDS_0", "vm-0000", 0)
	l.data = make([]byte, diskSize)
	for i := range l.data {
		l.data[i] = byte(i*7 + i/4096)
	}
	if err := os.WriteFile(l.flatOnDisk, l.data, 0o600); err != nil {
		t.Fatal(err)
	}
	return l
}

// logRoutes records what each endpoint served, for
// docs/benchmarks-vsphere.md.
func (l *hostLab) logRoutes(t *testing.T, what string) {
	l.book.mu.Lock()
	issued := l.book.count
	l.book.mu.Unlock()
	t.Logf("%s: disk %d bytes; vCenter /folder served %d bytes and took %d in %d requests; host /folder served %d bytes and took %d in %d requests; %d service tickets issued",
		what, len(l.data), l.vc.folderBytes.Load(), l.vc.folderUploaded.Load(), l.vc.folderRequests.Load(),
		l.host.folderBytes.Load(), l.host.folderUploaded.Load(), l.host.folderRequests.Load(), issued)
}

// connect opens a connector to the vCenter proxy, with the host's address
// and certificate known to the connection.
func (l *hostLab) connect(t *testing.T, mod func(*Config)) *Connector {
	return l.s.connect(t, func(c *Config) {
		c.URL, c.Thumbprint = l.vc.url.String(), l.vc.thumb
		c.HostAddresses = map[string]string{l.hostName: l.host.url.Host}
		c.HostThumbprints = map[string]string{l.hostName: l.host.thumb}
		if mod != nil {
			mod(c)
		}
	})
}
