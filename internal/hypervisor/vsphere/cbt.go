package vsphere

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"

	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// changeToken is what coffer records per disk after a backup: the
// snapshot disk's CBT changeId plus what must not have changed for that
// changeId to describe the same disk (its size, the VM's instance UUID).
type changeToken struct {
	ChangeID string
	Size     int64
	VM       string
	// Path is the disk's file ("[ds1] vm/vm.vmdk"): a disk moved to other
	// storage is read in full rather than trusted to keep its tracking.
	Path string
}

func encodeToken(t changeToken) string {
	v := url.Values{"cid": {t.ChangeID}, "size": {strconv.FormatInt(t.Size, 10)}, "vm": {t.VM}}
	if t.Path != "" {
		v.Set("path", t.Path)
	}
	return v.Encode()
}

func decodeToken(s string) (changeToken, bool) {
	v, err := url.ParseQuery(s)
	if err != nil || v.Get("cid") == "" {
		return changeToken{}, false
	}
	size, err := strconv.ParseInt(v.Get("size"), 10, 64)
	if err != nil {
		return changeToken{}, false
	}
	return changeToken{ChangeID: v.Get("cid"), Size: size, VM: v.Get("vm"), Path: v.Get("path")}, true
}

// planChanges decides whether a disk can be read incrementally and, if so,
// fetches its change set now: a failing QueryChangedDiskAreas (CBT reset,
// unknown changeId) must turn into a full read with a warning here, not
// into a failed backup later.
func (s *session) planChanges(ctx context.Context, ds *hypervisor.DiskSnapshot, currentCID string) {
	since := s.req.Since[ds.Key]
	if since == "" {
		return
	}
	old, ok := decodeToken(since)
	switch {
	case !ok:
		ds.ChangeWarning = "previous change token unreadable"
	case s.snap == nil:
		ds.ChangeWarning = "no VM snapshot in this mode, so no change set"
	case currentCID == "":
		ds.ChangeWarning = "changed block tracking is off or was reset on this disk"
	case old.Size != ds.Size:
		ds.ChangeWarning = fmt.Sprintf("disk resized from %d to %d bytes", old.Size, ds.Size)
	case old.VM != s.vm.Config.InstanceUuid:
		ds.ChangeWarning = "VM was re-registered or moved (instance UUID changed)"
	case old.Path != "" && old.Path != ds.Path:
		ds.ChangeWarning = fmt.Sprintf("disk moved from %s to %s", old.Path, ds.Path)
	}
	if ds.ChangeWarning != "" {
		s.warn("disk %s: %s; reading it in full", ds.Name, ds.ChangeWarning)
		return
	}
	key, _ := strconv.Atoi(ds.Key)
	areas, err := s.c.queryAreas(ctx, s.vm.Self, *s.snap, int32(key), ds.Size, old.ChangeID)
	if err != nil {
		ds.ChangeWarning = fmt.Sprintf("QueryChangedDiskAreas against changeId %q failed: %v", old.ChangeID, err)
		s.warn("disk %s: %s; reading it in full", ds.Name, ds.ChangeWarning)
		return
	}
	s.changed[ds.Key] = areas
	ds.Changes = "incremental"
	if s.req.Differential {
		ds.Changes = "differential"
	}
}

// queryAreas follows QueryChangedDiskAreas pages until the end of the
// disk: each answer covers [startOffset, startOffset+length) only. With
// changeId "*" the areas are the allocated ones.
func (c *Connector) queryAreas(ctx context.Context, vm, snap types.ManagedObjectReference, key int32, size int64, changeID string) ([]hypervisor.Extent, error) {
	var out []hypervisor.Extent
	for off := int64(0); off < size; {
		res, err := methods.QueryChangedDiskAreas(ctx, c.client, &types.QueryChangedDiskAreas{
			This: vm, Snapshot: &snap, DeviceKey: key, StartOffset: off, ChangeId: changeID})
		if err != nil {
			return nil, err
		}
		info := res.Returnval
		for _, a := range info.ChangedArea {
			out = append(out, hypervisor.Extent{Offset: a.Start, Length: a.Length})
		}
		next := info.StartOffset + info.Length
		if next <= off {
			return nil, fmt.Errorf("QueryChangedDiskAreas made no progress at offset %d", off)
		}
		off = next
	}
	return normalize(out, size), nil
}

// normalize sorts, clips to the disk and merges touching extents, as the
// DiskReader contract requires.
func normalize(in []hypervisor.Extent, size int64) []hypervisor.Extent {
	sort.Slice(in, func(i, j int) bool { return in[i].Offset < in[j].Offset })
	var out []hypervisor.Extent
	for _, e := range in {
		if e.Offset >= size || e.Length <= 0 {
			continue
		}
		if e.Offset+e.Length > size {
			e.Length = size - e.Offset
		}
		if n := len(out); n > 0 && out[n-1].Offset+out[n-1].Length >= e.Offset {
			if end := e.Offset + e.Length; end > out[n-1].Offset+out[n-1].Length {
				out[n-1].Length = end - out[n-1].Offset
			}
			continue
		}
		out = append(out, e)
	}
	return out
}

func asTaskError(err error) (*task.Error, bool) {
	var te *task.Error
	if errors.As(err, &te) {
		return te, true
	}
	return nil, false
}

// diskReader reads one frozen disk through the transport; its reads end
// with the context it was opened with, whichever transport serves them.
type diskReader struct {
	ctx     context.Context
	s       *session
	key     string
	data    DiskData
	size    int64
	changes string
	changed []hypervisor.Extent
}

func (r *diskReader) ReadAt(p []byte, off int64) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.data.ReadAt(p, off)
}

func (r *diskReader) Size() int64  { return r.size }
func (r *diskReader) Close() error { return r.data.Close() }

// Allocated asks CBT with changeId "*" (allocated areas only); without CBT
// (or in as-is mode) the whole disk is one extent, which is always safe.
func (r *diskReader) Allocated(ctx context.Context) ([]hypervisor.Extent, error) {
	whole := []hypervisor.Extent{{Offset: 0, Length: r.size}}
	if r.s.snap == nil || r.s.vm.Config.ChangeTrackingEnabled == nil || !*r.s.vm.Config.ChangeTrackingEnabled {
		return whole, nil
	}
	key, _ := strconv.Atoi(r.key)
	areas, err := r.s.c.queryAreas(ctx, r.s.vm.Self, *r.s.snap, int32(key), r.size, "*")
	if err != nil && ctx.Err() != nil {
		return nil, err // cancelled: not a reason to read the whole disk
	}
	if err != nil {
		r.s.c.log.Debug("vsphere: allocated areas unavailable; reading the whole disk", "vm", r.s.ref.Name, "disk", r.key, "err", err)
		return whole, nil
	}
	return areas, nil
}

// Changed returns the change set fetched at snapshot time.
func (r *diskReader) Changed(context.Context) ([]hypervisor.Extent, bool, error) {
	if r.changes == "full" || r.changes == "" {
		return nil, false, nil
	}
	return r.changed, true, nil
}
