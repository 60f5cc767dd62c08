package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"golang.org/x/sync/errgroup"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere"
)

// fleet is the simulated vCenter and a connector logged in to it.
type fleet struct {
	o      options
	model  *simulator.Model
	server *simulator.Server
	conn   *vsphere.Connector
	state  string
}

const user, password = "coffer-backup@vsphere.local", "bench"

func newFleet(ctx context.Context, o options) *fleet {
	m := simulator.VPX()
	m.Host, m.Cluster, m.ClusterHost, m.Datastore, m.Machine, m.Autostart = 0, 1, o.hosts, o.datastores, 0, false
	if err := m.Create(); err != nil {
		log.Fatal(err)
	}
	m.Service.TLS = new(tls.Config)
	m.Service.Listen = &url.URL{User: url.UserPassword(user, password)}
	f := &fleet{o: o, model: m, server: m.Service.NewServer()}
	// govmomi verifies a pinned thumbprint by retrying a handshake that
	// failed normal verification; the server logs each first attempt.
	f.server.Config.ErrorLog = log.New(io.Discard, "", 0)
	sdk := &url.URL{Scheme: f.server.URL.Scheme, Host: f.server.URL.Host, Path: f.server.URL.Path}
	admin, err := govmomi.NewClient(ctx, &url.URL{Scheme: sdk.Scheme, Host: sdk.Host, Path: sdk.Path,
		User: url.UserPassword(user, password)}, true)
	if err != nil {
		log.Fatal(err)
	}
	f.createVMs(ctx, admin)
	if f.state, err = os.MkdirTemp("", "coffer-bench-vsphere-state-"); err != nil {
		log.Fatal(err)
	}
	f.conn, err = vsphere.New(ctx, vsphere.Config{URL: sdk.String(), User: user, Password: password,
		Thumbprint: soap.ThumbprintSHA256(f.server.Certificate()), StateDir: f.state, TaskPoll: o.poll,
		// vcsim has no CBT: every backup warns and reads whole disks.
		Log: slog.New(slog.DiscardHandler),
		// The simulated hosts have no address: read through the vCenter
		// simulator, as the recorded figures did.
		ReadFrom: vsphere.ReadFromVCenter})
	if err != nil {
		log.Fatal(err)
	}
	return f
}

func (f *fleet) close() {
	f.conn.Close(context.Background())
	f.server.Close()
	f.model.Remove()
	os.RemoveAll(f.state)
}

// createVMs creates the VMs concurrently (vcsim's own model would put all
// of them on the first datastore and take ~40 s for 1000), ten per
// datastore, each with one flat disk that holds o.data random bytes.
func (f *fleet) createVMs(ctx context.Context, c *govmomi.Client) {
	fd := find.NewFinder(c.Client, true)
	dc, err := fd.DefaultDatacenter(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fd.SetDatacenter(dc)
	folders, err := dc.Folders(ctx)
	if err != nil {
		log.Fatal(err)
	}
	pool, err := fd.DefaultResourcePool(ctx)
	if err != nil {
		log.Fatal(err)
	}
	dss, err := fd.DatastoreList(ctx, "*")
	if err != nil {
		log.Fatal(err)
	}
	dirs := map[string]string{}
	for _, ds := range dss {
		var m mo.Datastore
		if err := ds.Properties(ctx, ds.Reference(), []string{"summary"}, &m); err != nil {
			log.Fatal(err)
		}
		u, _ := url.Parse(m.Summary.Url)
		dirs[ds.Name()] = u.Path
	}
	data := make([]byte, f.o.data)
	rand.Read(data)
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(64)
	for i := range f.o.vms {
		g.Go(func() error {
			ds := dss[i%len(dss)].Name()
			name := vmName(i)
			spec := types.VirtualMachineConfigSpec{Name: name, GuestId: string(types.VirtualMachineGuestOsIdentifierOtherGuest),
				NumCPUs: 1, MemoryMB: 256, ChangeTrackingEnabled: types.NewBool(true),
				Files: &types.VirtualMachineFileInfo{VmPathName: "[" + ds + "]"}}
			var devs object.VirtualDeviceList
			scsi, _ := devs.CreateSCSIController("pvscsi")
			disk := devs.CreateDisk(scsi.(types.BaseVirtualController), types.ManagedObjectReference{},
				fmt.Sprintf("[%s] %s/disk.vmdk", ds, name))
			disk.CapacityInKB = f.o.diskSize / 1024
			devs = append(devs, scsi, disk)
			spec.DeviceChange, _ = devs.ConfigSpec(types.VirtualDeviceConfigSpecOperationAdd)
			spec.DeviceChange[1].GetVirtualDeviceConfigSpec().FileOperation = types.VirtualDeviceConfigSpecFileOperationCreate
			task, err := folders.VmFolder.CreateVM(gctx, spec, pool, nil)
			if err != nil {
				return err
			}
			info, err := task.WaitForResult(gctx)
			if err != nil {
				return fmt.Errorf("create %s: %w", name, err)
			}
			vm := object.NewVirtualMachine(c.Client, info.Result.(types.ManagedObjectReference))
			if task, err = vm.PowerOn(gctx); err != nil {
				return err
			}
			if err := task.Wait(gctx); err != nil {
				return err
			}
			// A real flat extent is as large as the disk; vcsim leaves it
			// empty.
			mu.Lock()
			dir := dirs[ds]
			mu.Unlock()
			flat := filepath.Join(dir, path.Join(name, "disk-flat.vmdk"))
			if err := os.Truncate(flat, f.o.diskSize); err != nil {
				return err
			}
			fh, err := os.OpenFile(flat, os.O_WRONLY, 0)
			if err != nil {
				return err
			}
			defer fh.Close()
			_, err = fh.WriteAt(data, 0)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		log.Fatal(err)
	}
}

// counting wraps a connector and records the peak number of snapshot
// sessions in flight, in total and on any one datastore, from the call to
// Snapshot to the return of Close, to prove the limits held.
type counting struct {
	hypervisor.Connector
	mu          sync.Mutex
	ds          map[string][]string // VM ID -> datastores
	total, peak int
	perDS       map[string]int
	peakDS      int
	// Time spent in Snapshot and in Close, summed over sessions.
	snapTime, closeTime time.Duration
	sessions            int
}

func newCounting(c hypervisor.Connector) *counting {
	return &counting{Connector: c, ds: map[string][]string{}, perDS: map[string]int{}}
}

func (c *counting) Inventory(ctx context.Context) ([]hypervisor.VM, error) {
	vms, err := c.Connector.Inventory(ctx)
	c.mu.Lock()
	for _, vm := range vms {
		c.ds[vm.ID] = vm.Datastores
	}
	c.mu.Unlock()
	return vms, err
}

func (c *counting) add(id string, d int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.total += d
	c.peak = max(c.peak, c.total)
	for _, ds := range c.ds[id] {
		c.perDS[ds] += d
		c.peakDS = max(c.peakDS, c.perDS[ds])
	}
}

func (c *counting) peaks() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peak, c.peakDS
}

func (c *counting) Snapshot(ctx context.Context, vm hypervisor.VMRef, req hypervisor.SnapshotRequest) (hypervisor.Session, error) {
	c.add(vm.ID, 1)
	start := time.Now()
	s, err := c.Connector.Snapshot(ctx, vm, req)
	took := time.Since(start)
	if err != nil {
		c.add(vm.ID, -1)
		return nil, err
	}
	c.mu.Lock()
	c.snapTime += took
	c.sessions++
	c.mu.Unlock()
	return &countedSession{Session: s, done: func() { c.add(vm.ID, -1) }, closed: func(d time.Duration) {
		c.mu.Lock()
		c.closeTime += d
		c.mu.Unlock()
	}}, nil
}

type countedSession struct {
	hypervisor.Session
	once   sync.Once
	done   func()
	closed func(time.Duration)
}

func (s *countedSession) Close(ctx context.Context, ok bool) (map[string]string, error) {
	defer s.once.Do(s.done)
	start := time.Now()
	defer func() { s.closed(time.Since(start)) }()
	return s.Session.Close(ctx, ok)
}

// means returns the mean time of Snapshot and of Close calls.
func (c *counting) means() (time.Duration, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sessions == 0 {
		return 0, 0
	}
	return c.snapTime / time.Duration(c.sessions), c.closeTime / time.Duration(c.sessions)
}

func numCPU() int { return runtime.NumCPU() }
