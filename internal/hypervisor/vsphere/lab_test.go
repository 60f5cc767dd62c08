package vsphere

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/tasktrack"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"golang.org/x/sync/errgroup"
)

// simOptions shape an in-process vcsim inventory.
type simOptions struct {
	Hosts, Datastores, VMs int
	DiskSize               int64 // bytes per disk (default 4 MiB)
	Disks                  int   // disks per VM (default 1)
	PoweredOff             bool
}

// sim is a vcsim instance served over TLS from this process, with VMs
// spread evenly over its datastores (vcsim's own model puts every VM on the
// first datastore, so the VMs are created here).
type sim struct {
	t      testing.TB
	model  *simulator.Model
	server *simulator.Server
	client *vim25.Client // admin client for test set-up and checks
	url    *url.URL      // the SDK URL without credentials
	thumb  string
	dsDirs map[string]string // datastore name -> local directory
	vms    []types.ManagedObjectReference
	opts   simOptions
}

const simUser, simPass = "backup@vsphere.local", "s3cret"

func startSim(t testing.TB, o simOptions) *sim {
	t.Helper()
	if o.DiskSize == 0 {
		o.DiskSize = 4 << 20
	}
	if o.Disks == 0 {
		o.Disks = 1
	}
	m := simulator.VPX()
	m.Host, m.Cluster, m.ClusterHost, m.Datastore, m.Machine, m.Autostart = 0, 1, o.Hosts, o.Datastores, 0, false
	if err := m.Create(); err != nil {
		t.Fatal(err)
	}
	m.Service.TLS = new(tls.Config)
	m.Service.Listen = &url.URL{User: url.UserPassword(simUser, simPass)}
	s := &sim{t: t, model: m, server: m.Service.NewServer(), dsDirs: map[string]string{}, opts: o}
	t.Cleanup(func() { s.server.Close(); m.Remove() })
	s.url = &url.URL{Scheme: s.server.URL.Scheme, Host: s.server.URL.Host, Path: s.server.URL.Path}
	s.thumb = soap.ThumbprintSHA256(s.server.Certificate())
	ctx := context.Background()
	sc := soap.NewClient(s.url, true)
	var err error
	if s.client, err = vim25.NewClient(ctx, sc); err != nil {
		t.Fatal(err)
	}
	if _, err := methods.Login(ctx, s.client, &types.Login{This: *s.client.ServiceContent.SessionManager,
		UserName: simUser, Password: simPass}); err != nil {
		t.Fatal(err)
	}
	s.createVMs(ctx)
	return s
}

func (s *sim) createVMs(ctx context.Context) {
	c := s.client
	var dss []mo.Datastore
	dsRefs := s.find(ctx, "Datastore")
	if err := s.pc().Retrieve(ctx, dsRefs, []string{"name", "summary"}, &dss); err != nil {
		s.t.Fatal(err)
	}
	for _, d := range dss {
		u, _ := url.Parse(d.Summary.Url)
		s.dsDirs[d.Name] = u.Path
	}
	var pools []mo.ResourcePool
	if err := s.pc().Retrieve(ctx, s.find(ctx, "ResourcePool"), []string{"name"}, &pools); err != nil || len(pools) == 0 {
		s.t.Fatal(err)
	}
	var dcs []mo.Datacenter
	if err := s.pc().Retrieve(ctx, s.find(ctx, "Datacenter"), []string{"vmFolder"}, &dcs); err != nil {
		s.t.Fatal(err)
	}
	folder := object.NewFolder(c, dcs[0].VmFolder)
	pool := pools[0].Self
	tr := tasktrack.New(c, 5*time.Millisecond)
	defer tr.Stop()
	s.vms = make([]types.ManagedObjectReference, s.opts.VMs)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(64)
	for i := range s.opts.VMs {
		g.Go(func() error {
			ds := dss[i%len(dss)].Name
			name := fmt.Sprintf("vm-%04d", i)
			spec := s.vmSpec(name, ds, s.opts.Disks, s.opts.DiskSize)
			task, err := folder.CreateVM(gctx, spec, object.NewResourcePool(c, pool), nil)
			if err != nil {
				return err
			}
			info, err := tr.Wait(gctx, task.Reference())
			if err != nil {
				return err
			}
			ref := info.Result.(types.ManagedObjectReference)
			s.vms[i] = ref
			if !s.opts.PoweredOff {
				task, err := object.NewVirtualMachine(c, ref).PowerOn(gctx)
				if err != nil {
					return err
				}
				if _, err := tr.Wait(gctx, task.Reference()); err != nil {
					return err
				}
			}
			// Real flat extents are as large as the disk; vcsim creates
			// them empty.
			for d := range s.opts.Disks {
				if err := os.Truncate(s.flatPath(ds, name, d), s.opts.DiskSize); err != nil {
					return err
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		s.t.Fatal(err)
	}
}

func (s *sim) vmSpec(name, ds string, disks int, size int64) types.VirtualMachineConfigSpec {
	spec := types.VirtualMachineConfigSpec{Name: name, GuestId: string(types.VirtualMachineGuestOsIdentifierOtherGuest),
		NumCPUs: 2, MemoryMB: 512, Files: &types.VirtualMachineFileInfo{VmPathName: "[" + ds + "]"}}
	var devs object.VirtualDeviceList
	scsi, _ := devs.CreateSCSIController("pvscsi")
	devs = append(devs, scsi)
	for d := range disks {
		disk := devs.CreateDisk(scsi.(types.BaseVirtualController), types.ManagedObjectReference{},
			fmt.Sprintf("[%s] %s/%s", ds, name, diskFile(d)))
		disk.CapacityInKB = size / 1024
		devs = append(devs, disk)
	}
	spec.DeviceChange, _ = devs.ConfigSpec(types.VirtualDeviceConfigSpecOperationAdd)
	for _, dc := range spec.DeviceChange {
		if _, ok := dc.GetVirtualDeviceConfigSpec().Device.(*types.VirtualDisk); ok {
			dc.GetVirtualDeviceConfigSpec().FileOperation = types.VirtualDeviceConfigSpecFileOperationCreate
		}
	}
	return spec
}

func diskFile(i int) string {
	if i == 0 {
		return "disk.vmdk"
	}
	return fmt.Sprintf("disk_%d.vmdk", i)
}

func (s *sim) flatPath(ds, vm string, disk int) string {
	return filepath.Join(s.dsDirs[ds], vm, strings.TrimSuffix(diskFile(disk), ".vmdk")+"-flat.vmdk")
}

func (s *sim) pc() *property.Collector { return property.DefaultCollector(s.client) }

func (s *sim) find(ctx context.Context, kind string) []types.ManagedObjectReference {
	v, err := view.NewManager(s.client).CreateContainerView(ctx, s.client.ServiceContent.RootFolder, []string{kind}, true)
	if err != nil {
		s.t.Fatal(err)
	}
	defer v.Destroy(ctx)
	refs, err := v.Find(ctx, []string{kind}, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	return refs
}

// connect opens a connector to the simulator the way a site would: TLS
// verification on, the server certificate pinned by thumbprint.
func (s *sim) connect(t testing.TB, mod func(*Config)) *Connector {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "pw")
	os.WriteFile(pw, []byte(simPass+"\n"), 0o600)
	cfg := Config{URL: s.url.String(), User: simUser, PasswordFile: pw, Thumbprint: s.thumb,
		StateDir: filepath.Join(t.TempDir(), "state"), TaskPoll: 10 * time.Millisecond}
	if mod != nil {
		mod(&cfg)
	}
	c, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// vm returns the simulator's object for a VM, for checks of its state.
func (s *sim) vm(ref types.ManagedObjectReference) mo.VirtualMachine {
	var vm mo.VirtualMachine
	if err := s.pc().RetrieveOne(context.Background(), ref, []string{"name", "snapshot", "runtime.powerState", "config"}, &vm); err != nil {
		s.t.Fatal(err)
	}
	return vm
}

var simMu sync.Mutex // simulator.TaskDelay is global: tests that set it run alone
