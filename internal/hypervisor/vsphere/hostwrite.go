package vsphere

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/ranged"
)

// routedWriter is a DiskWriter that says which way a disk's bytes went,
// for the restore's task log and warnings.
type routedWriter interface {
	writeRouted(ctx context.Context, loc DiskLocation, src hypervisor.DiskSource) (routed, error)
}

// WriteDisk implements DiskWriter.
func (t *hostDirect) WriteDisk(ctx context.Context, loc DiskLocation, src hypervisor.DiskSource) error {
	_, err := t.writeRouted(ctx, loc, src)
	return err
}

// writeRouted uploads a restored disk's flat extent to the /folder service
// of the ESXi host the VM is registered on, the way read-from says (see
// route). A PUT replaces the whole file, so an upload that failed on the
// host is sent again from its first byte through vCenter (read-from:
// host); nothing of the failed attempt survives it.
func (t *hostDirect) writeRouted(ctx context.Context, loc DiskLocation, src hypervisor.DiskSource) (routed, error) {
	flat, ok := flatExtent(loc.Descriptor)
	if !ok {
		return routed{}, fmt.Errorf("vsphere: %s is not a .vmdk descriptor", loc.Descriptor)
	}
	return t.route(ctx, "disk "+loc.Descriptor, writing, loc.Host,
		func(ep *hostEndpoint) error { return t.uploadToHost(ctx, ep, loc.Datastore, flat, loc.Size, src) },
		func() error { return t.vcenter.WriteDisk(ctx, loc, src) })
}

// uploadToHost PUTs the disk to the host, authorised by the host login or
// by a ticket for exactly this PUT.
func (t *hostDirect) uploadToHost(ctx context.Context, ep *hostEndpoint, datastore, path string, size int64, src hypervisor.DiskSource) error {
	u := hostURL(ep, datastore, path)
	put := types.SessionManagerHttpServiceRequestSpecMethodHttpPut
	sc, c, err := t.hostClient(ctx, ep, u, put)
	if err != nil {
		return err
	}
	if c == nil && ep.login == nil {
		if c, _, err = t.ticket(ctx, u, put); err != nil {
			return err
		}
	}
	return putDisk(ctx, sc, u, c, size, src)
}

// putDisk sends a disk as one PUT of its whole flat extent, so the file
// has exactly the disk's size; holes go as zeros. ticket, when set,
// authorises the request; else the client's session cookie does.
func putDisk(ctx context.Context, sc *soap.Client, u *url.URL, ticket *http.Cookie, size int64, src hypervisor.DiskSource) error {
	fail := func(f string, a ...any) error {
		return fmt.Errorf("vsphere: upload %s to %s: %s", u.Path, u.Host, fmt.Sprintf(f, a...))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u.String(), ranged.Stream(src, size))
	if err != nil {
		return fail("%v", err)
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "application/octet-stream")
	if ticket != nil {
		req.AddCookie(ticket)
	}
	res, err := sc.Client.Do(req)
	if err != nil {
		return fail("%v", err)
	}
	defer res.Body.Close()
	switch res.StatusCode {
	case http.StatusOK, http.StatusCreated:
		return nil
	case http.StatusUnauthorized, http.StatusForbidden:
		if ticket != nil {
			return fail("the service ticket was refused (%s)", res.Status)
		}
		return fail("the session was refused (%s)", res.Status)
	default:
		return fail("%s", res.Status)
	}
}
