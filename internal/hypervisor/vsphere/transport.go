package vsphere

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/soap"
)

// DiskLocation is the frozen base extent of one disk, as a transport needs
// it: which datacenter and datastore hold it, the descriptor path on the
// datastore, and its virtual size.
type DiskLocation struct {
	Datacenter string // inventory path of the datacenter ("DC0")
	Datastore  string // datastore name
	Descriptor string // "vm/disk1.vmdk", relative to the datastore
	Size       int64
	// Host is the HostSystem (MoRef value) running the VM at the
	// snapshot, whose own /folder service can serve the extent; "" when
	// unknown.
	Host string
	// Key is the disk's device key in the VM (hot-add matches the disk
	// it attached by it); VM the VM's MoRef value.
	Key, VM string
}

// Transport moves disk bytes. The built-in DatastoreHTTP reads the flat
// extent over the endpoint's HTTPS /folder service. Sites can plug in
// others with the same shape: hot-add (a data-mover VM attaches the
// snapshot's disks and reads them as local block devices) or VDDK/NBD(SSL)
// through a helper process.
type Transport interface {
	Name() string
	// OpenDisk opens the disk's frozen data for random reads. The reader
	// is safe for concurrent ReadAt calls.
	OpenDisk(ctx context.Context, loc DiskLocation) (DiskData, error)
}

// DiskData is an open frozen disk.
type DiskData interface {
	io.ReaderAt
	Close() error
}

// DatastoreHTTP reads "<disk>-flat.vmdk" with HTTP Range requests. It works
// for flat (thick or thin on VMFS/NFS) disks; sparse and SEsparse deltas
// are not flat and are refused before any read.
type DatastoreHTTP struct {
	Client *vim25.Client
	// Connections bounds concurrent range requests per open disk.
	Connections int
}

func (t *DatastoreHTTP) Name() string { return "datastore-https" }

// OpenDisk implements Transport.
func (t *DatastoreHTTP) OpenDisk(ctx context.Context, loc DiskLocation) (DiskData, error) {
	flat, ok := flatExtent(loc.Descriptor)
	if !ok {
		return nil, fmt.Errorf("vsphere: %s is not a .vmdk descriptor", loc.Descriptor)
	}
	d := t.reader(object.NewDatastoreURL(*t.Client.URL(), loc.Datacenter, loc.Datastore, flat), loc.Size)
	d.ctx = ctx
	return d, nil
}

// reader reads size bytes of the datastore file at u with range requests,
// at most t.Connections (default 4) at a time.
func (t *DatastoreHTTP) reader(u *url.URL, size int64) *httpDisk {
	n := t.Connections
	if n <= 0 {
		n = 4
	}
	return &httpDisk{sc: t.Client.Client, u: u, size: size, slots: make(chan struct{}, n)}
}

// openFile opens a datastore file as it is, without the descriptor to
// -flat mapping: for files that are not disks (a with-memory snapshot's
// .vmsn and .vmem). Their size is asked from the server when opened,
// because the API's file layout is no authority on it (vcsim reports 0,
// and a file may still grow until the snapshot task completes).
func (t *DatastoreHTTP) openFile(ctx context.Context, datacenter, datastore, path string) (*httpDisk, error) {
	d := t.reader(object.NewDatastoreURL(*t.Client.URL(), datacenter, datastore, path), 0)
	d.ctx = ctx
	size, err := probeSize(ctx, d)
	if err != nil {
		return nil, err
	}
	d.size = size
	return d, nil
}

// probeSize asks for the file's first byte: the Content-Range of the
// answer carries the whole length. A HEAD would do on ESXi, but a GET of
// one byte is answered the same way by every server that does ranges.
func probeSize(ctx context.Context, d *httpDisk) (int64, error) {
	u := d.u
	res, err := d.get(ctx, "bytes=0-0")
	if err != nil {
		return 0, fmt.Errorf("vsphere: size of %s: %w", u.Path, err)
	}
	// Not drained: at most one byte (or a whole file from a server that
	// ignores Range, which is not worth reading to reuse a connection).
	defer res.Body.Close()
	switch res.StatusCode {
	case http.StatusPartialContent, http.StatusRequestedRangeNotSatisfiable:
		n, err := parseContentRange(res.Header.Get("Content-Range"), res.StatusCode)
		if err != nil {
			return 0, fmt.Errorf("vsphere: size of %s: %w", u.Path, err)
		}
		return n, nil
	case http.StatusOK: // Range ignored: the body is the whole file
		if res.ContentLength < 0 {
			return 0, fmt.Errorf("vsphere: size of %s: the server sent neither a range nor a length", u.Path)
		}
		return res.ContentLength, nil
	default:
		return 0, fmt.Errorf("vsphere: size of %s: %s", u.Path, res.Status)
	}
}

// parseContentRange returns the complete length from a Content-Range
// header answering "bytes=0-0": "bytes 0-0/N" with 206, "bytes */N" with
// 416 (only an empty file cannot satisfy the first byte, so N must be 0).
func parseContentRange(h string, status int) (int64, error) {
	bad := func(why string) (int64, error) {
		return 0, fmt.Errorf("unusable Content-Range %q (status %d): %s", h, status, why)
	}
	rest, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes ")
	if !ok {
		return bad("not a byte range")
	}
	rng, total, ok := strings.Cut(rest, "/")
	if !ok {
		return bad("no complete length")
	}
	if total == "*" {
		return bad("complete length unknown")
	}
	n, err := strconv.ParseInt(total, 10, 64)
	if err != nil || n < 0 {
		return bad("complete length is not a number")
	}
	switch {
	case status == http.StatusRequestedRangeNotSatisfiable:
		if rng != "*" || n != 0 {
			return bad("the first byte is only unsatisfiable in an empty file")
		}
	case rng != "0-0" || n < 1:
		return bad("not the first byte that was asked for")
	}
	return n, nil
}

// flatExtent maps "dir/disk.vmdk" to "dir/disk-flat.vmdk", the naming
// vSphere uses for a flat disk's data extent.
func flatExtent(desc string) (string, bool) {
	if !strings.HasSuffix(desc, ".vmdk") {
		return "", false
	}
	return strings.TrimSuffix(desc, ".vmdk") + "-flat.vmdk", true
}

type httpDisk struct {
	// ctx is the context the file was opened with: a read in flight ends
	// with it (nil: reads end on their own).
	ctx   context.Context
	sc    *soap.Client
	u     *url.URL
	size  int64
	slots chan struct{}
	// ticket, when set, authorises each request (a one-time vCenter
	// service ticket for a host's /folder); else the client's session
	// cookie does.
	ticket func(context.Context) (*http.Cookie, error)
	// counter, when set, adds up the bytes read (per route).
	counter *atomic.Int64
}

// get sends one GET with the Range header rng.
func (d *httpDisk) get(ctx context.Context, rng string) (*http.Response, error) {
	dl := &soap.Download{Method: http.MethodGet, Headers: map[string]string{"Range": rng}}
	if d.ticket != nil {
		c, err := d.ticket(ctx)
		if err != nil {
			return nil, err
		}
		dl.Ticket = c
	}
	return d.sc.DownloadRequest(ctx, d.u, dl)
}

// ReadAt issues one Range request. The session cookie of the SOAP login
// authorises /folder on vCenter and ESXi alike. A flat extent may be
// shorter than the disk (thin on NFS): bytes past its end read as zeros.
func (d *httpDisk) ReadAt(p []byte, off int64) (int, error) {
	if off >= d.size {
		return 0, io.EOF
	}
	want := p
	if rem := d.size - off; int64(len(want)) > rem {
		want = want[:rem]
	}
	d.slots <- struct{}{}
	defer func() { <-d.slots }()
	ctx := d.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	res, err := d.get(ctx, fmt.Sprintf("bytes=%d-%d", off, off+int64(len(want))-1))
	if err != nil {
		return 0, fmt.Errorf("vsphere: read %s: %w", d.u.Path, err)
	}
	defer res.Body.Close()
	body := io.Reader(res.Body)
	switch res.StatusCode {
	case http.StatusPartialContent:
	case http.StatusOK: // server ignored Range: skip to the offset
		if _, err := io.CopyN(io.Discard, res.Body, off); err != nil {
			clear(want)
			return len(want), eofIfShort(p, want)
		}
	case http.StatusRequestedRangeNotSatisfiable:
		clear(want)
		return len(want), eofIfShort(p, want)
	default:
		return 0, fmt.Errorf("vsphere: read %s at %d: %s", d.u.Path, off, res.Status)
	}
	n, err := io.ReadFull(body, want)
	if d.counter != nil {
		d.counter.Add(int64(n))
	}
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		clear(want[n:])
		err = nil
	}
	if err != nil {
		return n, fmt.Errorf("vsphere: read %s at %d: %w", d.u.Path, off, err)
	}
	return len(want), eofIfShort(p, want)
}

func eofIfShort(p, got []byte) error {
	if len(got) < len(p) {
		return io.EOF
	}
	return nil
}

func (d *httpDisk) Close() error { return nil }
