package vsphere

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

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
func (t *DatastoreHTTP) OpenDisk(_ context.Context, loc DiskLocation) (DiskData, error) {
	flat, ok := flatExtent(loc.Descriptor)
	if !ok {
		return nil, fmt.Errorf("vsphere: %s is not a .vmdk descriptor", loc.Descriptor)
	}
	u := object.NewDatastoreURL(*t.Client.URL(), loc.Datacenter, loc.Datastore, flat)
	n := t.Connections
	if n <= 0 {
		n = 4
	}
	return &httpDisk{sc: t.Client.Client, u: u, size: loc.Size, slots: make(chan struct{}, n)}, nil
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
	sc    *soap.Client
	u     *url.URL
	size  int64
	slots chan struct{}
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
	ctx := context.Background()
	res, err := d.sc.DownloadRequest(ctx, d.u, &soap.Download{Method: http.MethodGet,
		Headers: map[string]string{"Range": fmt.Sprintf("bytes=%d-%d", off, off+int64(len(want))-1)}})
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
