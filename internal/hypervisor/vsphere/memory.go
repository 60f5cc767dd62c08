package vsphere

import (
	"context"
	"errors"
	"fmt"
	"path"

	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// A with-memory snapshot's memory state lives in files that belong to the
// snapshot: the .vmsn (snapshot data: configuration, device state and, when
// ESXi writes no separate file, the RAM) and the .vmem (the RAM). The VM's
// layoutEx names both; they are copied as they are, as memory streams of
// the session, and go away with the snapshot (nothing to journal).

// Keys of the memory streams in a session and in the backup point.
const (
	memoryVMSNKey = "memory-vmsn"
	memoryVMEMKey = "memory-vmem"
)

// memoryStream is one memory-state file of the session's snapshot.
type memoryStream struct {
	key, format string
	file        string // "[datastore] dir/file.vmsn", as layoutEx names it
}

// memoryLocation is where a memory stream is read from.
type memoryLocation struct {
	datacenter, datastore, path string
}

// snapshotMemoryFiles finds snap's entry in layout and maps its data and
// memory file keys (-1: none) to the files layoutEx lists. A snapshot
// taken with memory that lists neither is an error: the point would claim
// a memory state it does not hold.
func snapshotMemoryFiles(layout *types.VirtualMachineFileLayoutEx, snap types.ManagedObjectReference) ([]memoryStream, error) {
	if layout == nil {
		return nil, errors.New("the VM reports no file layout")
	}
	var entry *types.VirtualMachineFileLayoutExSnapshotLayout
	for i := range layout.Snapshot {
		if layout.Snapshot[i].Key == snap {
			entry = &layout.Snapshot[i]
			break
		}
	}
	if entry == nil {
		return nil, fmt.Errorf("snapshot %s is not in the VM's file layout", snap.Value)
	}
	names := map[int32]string{}
	for _, f := range layout.File {
		names[f.Key] = f.Name
	}
	var out []memoryStream
	for _, m := range []struct {
		fileKey     int32
		key, format string
	}{{entry.DataKey, memoryVMSNKey, "vmware-vmsn"}, {entry.MemoryKey, memoryVMEMKey, "vmware-vmem"}} {
		if m.fileKey < 0 {
			continue
		}
		name, ok := names[m.fileKey]
		if !ok {
			return nil, fmt.Errorf("file key %d of snapshot %s is not in the VM's file layout", m.fileKey, snap.Value)
		}
		if ds, p := splitDSPath(name); ds == "" || p == "" {
			return nil, fmt.Errorf("snapshot file %q is not a datastore path", name)
		}
		out = append(out, memoryStream{key: m.key, format: m.format, file: name})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("snapshot %s lists no data or memory file", snap.Value)
	}
	return out, nil
}

// describeMemory adds the memory state of a with-memory snapshot to the
// session's streams. Only the file layout's file list and snapshot list
// are asked for: its disk list grows with every disk and is not needed.
func (s *session) describeMemory(ctx context.Context) error {
	var vm mo.VirtualMachine
	if err := property.DefaultCollector(s.c.client).RetrieveOne(ctx, s.vm.Self,
		[]string{"layoutEx.file", "layoutEx.snapshot"}, &vm); err != nil {
		return fmt.Errorf("vsphere: memory state of %s: %w", s.ref.Name, err)
	}
	streams, err := snapshotMemoryFiles(vm.LayoutEx, *s.snap)
	if err != nil {
		return fmt.Errorf("vsphere: memory state of %s: %w", s.ref.Name, err)
	}
	s.mem = map[string]memoryLocation{}
	for _, m := range streams {
		ds, p := splitDSPath(m.file)
		dc, err := s.datacenterByName(ctx, ds)
		if err != nil {
			return fmt.Errorf("vsphere: memory state of %s: %w", s.ref.Name, err)
		}
		s.mem[m.key] = memoryLocation{datacenter: dc, datastore: ds, path: p}
		// Size stays 0 here: only the file itself knows it (see openFile);
		// the backup takes it from the reader.
		s.disks = append(s.disks, hypervisor.DiskSnapshot{Kind: hypervisor.KindMemory, Changes: "full",
			DiskInfo: hypervisor.DiskInfo{Key: m.key, Name: path.Base(p), Datastore: ds, Path: m.file, Format: m.format}})
	}
	return nil
}

// datacenterByName resolves the datacenter of one of the VM's datastores
// known only by name (the snapshot directory may be on a datastore none
// of the disks is on, so the cache may not have it yet).
func (s *session) datacenterByName(ctx context.Context, name string) (string, error) {
	s.c.mu.Lock()
	dc, ok := s.c.dcPath[name]
	s.c.mu.Unlock()
	if ok {
		return dc, nil
	}
	var dss []mo.Datastore
	if len(s.vm.Datastore) > 0 {
		if err := property.DefaultCollector(s.c.client).Retrieve(ctx, s.vm.Datastore, []string{"name"}, &dss); err != nil {
			return "", fmt.Errorf("datastore %s: %w", name, err)
		}
	}
	for _, d := range dss {
		if d.Name == name {
			ref := d.Self
			return s.c.datacenterOf(ctx, &ref, name)
		}
	}
	return "", fmt.Errorf("datastore %s is not among the VM's datastores", name)
}

// openMemory reads a memory file over a datastore HTTPS service, never
// through the configured transport: the files are always on a datastore,
// and a hot-add or VDDK transport reads disks only. A vCenter connection
// reads it from the ESXi host that runs the VM, as it reads disks (the
// same read-from); the task log names the route.
func (s *session) openMemory(ctx context.Context, loc memoryLocation) (hypervisor.DiskReader, error) {
	if s.snap == nil {
		return nil, errors.New("vsphere: session released; the memory state went with the VM snapshot")
	}
	name := path.Base(loc.path)
	if s.c.hosts == nil {
		t := &DatastoreHTTP{Client: s.c.client, Connections: s.c.cfg.ReadConnections}
		d, err := t.openFile(ctx, loc.datacenter, loc.datastore, loc.path)
		if err != nil {
			return nil, err
		}
		s.notes = append(s.notes, fmt.Sprintf("memory file %s read from the connection's datastore service", name))
		return memoryReader{d}, nil
	}
	host := ""
	if h := s.vm.Runtime.Host; h != nil {
		host = h.Value
	}
	d, r, err := s.c.hosts.openFile(ctx, host, loc)
	if err != nil {
		return nil, err
	}
	if r.warning != "" {
		s.warn("%s", r.warning)
	}
	s.notes = append(s.notes, fmt.Sprintf("memory file %s read %s", name, r.route))
	return memoryReader{d}, nil
}

// openFile opens a snapshot's memory file on host, or through vCenter,
// as route chooses; its size is the file's.
func (t *hostDirect) openFile(ctx context.Context, host string, loc memoryLocation) (*httpDisk, routed, error) {
	var d *httpDisk
	r, err := t.route(ctx, "memory file "+loc.path, reading, host,
		func(ep *hostEndpoint) (err error) {
			d, err = t.openOnHost(ctx, ep, loc.datastore, loc.path, -1)
			return err
		},
		func() (err error) {
			if d, err = t.vcenter.openFile(ctx, loc.datacenter, loc.datastore, loc.path); err == nil {
				d.counter = &t.vcenterBytes
			}
			return err
		})
	return d, r, err
}

// memoryReader is a memory file: all of it is data, and there is never a
// change set (memory is not tracked, so every point holds it in full).
type memoryReader struct{ *httpDisk }

func (m memoryReader) Size() int64 { return m.size }

func (m memoryReader) Allocated(context.Context) ([]hypervisor.Extent, error) {
	if m.size == 0 {
		return nil, nil
	}
	return []hypervisor.Extent{{Offset: 0, Length: m.size}}, nil
}

func (m memoryReader) Changed(context.Context) ([]hypervisor.Extent, bool, error) {
	return nil, false, nil
}
