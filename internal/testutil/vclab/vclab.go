// Package vclab is the tests' vCenter: an in-process vcsim server and an
// admin client that makes small VMs and reads and writes their disks, for
// the command line's and the console's tests of vSphere connections.
package vclab

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// Start serves a vCenter simulator with hosts hosts in one cluster
// and machines of its own VMs (10 GB disks, powered off) over TLS, for the
// user coffer with the password s3cret.
func Start(t *testing.T, hosts, machines int) *simulator.Server {
	return StartOn(t, "", nil, hosts, machines)
}

// StartOn is Start listening on addr ("" for loopback; an IP takes a port
// of its own), with TLS settings tlsConfig (nil for the defaults; a
// GetConfigForClient callback sees each client's address): the tests of
// workers in network namespaces serve it on their lab's network.
func StartOn(t *testing.T, addr string, tlsConfig *tls.Config, hosts, machines int) *simulator.Server {
	return StartReading(t, addr, tlsConfig, hosts, machines, nil)
}

// StartReading is StartOn whose datastore file reads (GET /folder/...,
// how coffer reads a snapshot's disks from the vCenter) first call
// beforeRead (nil: none), in the simulator's handler: a test holds a
// backup mid-read there, as long as it blocks.
func StartReading(t *testing.T, addr string, tlsConfig *tls.Config, hosts, machines int, beforeRead func(*http.Request)) *simulator.Server {
	return StartHooked(t, addr, tlsConfig, hosts, machines, Hooks{BeforeRead: beforeRead})
}

// Hooks are a test's hold points in the simulator's handler.
type Hooks struct {
	// BeforeRead is called before each datastore file read.
	BeforeRead func(*http.Request)
	// BeforeCall is called before each SDK call with the name of its
	// method (PowerOnVM_Task) and its body readable; the call runs only if it returns true
	// (false: its client is gone, and it answers with an error).
	BeforeCall func(r *http.Request, method string) bool
}

// soapMethod finds an SDK request's method: the first element of the
// envelope's body.
var soapMethod = regexp.MustCompile(`<(?:\w+:)?Body[^>]*>\s*<(?:\w+:)?(\w+)`)

// StartHooked is StartOn whose handler calls hooks first.
func StartHooked(t *testing.T, addr string, tlsConfig *tls.Config, hosts, machines int, hooks Hooks) *simulator.Server {
	m := simulator.VPX()
	m.Host, m.ClusterHost, m.Machine, m.Autostart = 0, hosts, machines, false
	if err := m.Create(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Remove)
	RemovableDatastores(m)
	if tlsConfig == nil {
		tlsConfig = new(tls.Config)
	}
	m.Service.TLS = tlsConfig
	if hooks.BeforeRead != nil || hooks.BeforeCall != nil {
		m.Service.ServeMux = http.NewServeMux()
	}
	if hooks.BeforeRead != nil {
		// More specific than the simulator's own "/folder/": it takes
		// the reads, and hands them on.
		m.Service.ServeMux.HandleFunc("GET /folder/", func(w http.ResponseWriter, r *http.Request) {
			hooks.BeforeRead(r)
			m.Service.ServeDatastore(w, r)
		})
	}
	if hooks.BeforeCall != nil {
		m.Service.ServeMux.HandleFunc("POST /sdk", func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			method := ""
			if sm := soapMethod.FindSubmatch(body); sm != nil {
				method = string(sm[1])
			}
			r.Body = io.NopCloser(bytes.NewReader(body)) // the hook may read it
			if !hooks.BeforeCall(r, method) {
				http.Error(w, "the test held the call until its client left", http.StatusServiceUnavailable)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			m.Service.ServeSDK(w, r)
		})
	}
	m.Service.Listen = &url.URL{User: url.UserPassword("coffer", Password)}
	if addr != "" {
		m.Service.Listen.Host = net.JoinHostPort(addr, "0")
	}
	srv := m.Service.NewServer()
	t.Cleanup(srv.Close)
	return srv
}

// Lab is a test's own view of a vcsim server: an admin client that
// creates a small VM and reads and writes disk files where vcsim keeps
// them (the datastores are local directories).
type Lab struct {
	t *testing.T
	c *vim25.Client
	// SDK is the SDK URL without credentials.
	SDK string
	// VMs are the VMs the lab created, oldest first (app-01 first).
	VMs []mo.VirtualMachine
	// Thumbprint pins the simulator's certificate in coffer's config.
	Thumbprint string
}

// Disk is a VM disk's flat extent on the local datastore directory.
type Disk struct {
	Path string
	Size int64
}

// DiskSize is the size of the disk of a VM CreateVM makes.
const DiskSize = 2 << 20

// New opens a lab on srv (Start) with one powered-off VM, app-01.
func New(t *testing.T, srv *simulator.Server) *Lab {
	ctx := context.Background()
	sdk := &url.URL{Scheme: srv.URL.Scheme, Host: srv.URL.Host, Path: srv.URL.Path}
	c, err := vim25.NewClient(ctx, soap.NewClient(sdk, true)) // the test's own simulator
	if err != nil {
		t.Fatal(err)
	}
	if err := session.NewManager(c).Login(ctx, srv.URL.User); err != nil {
		t.Fatal(err)
	}
	l := &Lab{t: t, c: c, SDK: sdk.String(), Thumbprint: soap.ThumbprintSHA256(srv.Certificate())}
	l.CreateVM(ctx, "app-01")
	return l
}

// CreateVM adds a powered-off VM with one small thin disk on the first
// datastore (vcsim's own VMs have 10 GB disks).
func (l *Lab) CreateVM(ctx context.Context, name string) {
	l.CreateVMWith(ctx, VM{Name: name, Controller: "pvscsi", DiskSize: DiskSize})
}

// VM shapes a VM of the lab: its disk's controller (a govmomi SCSI
// controller name: pvscsi, lsilogic, lsilogic-sas, buslogic) and size,
// and a network adapter (a govmomi card name such as vmxnet3, or none).
type VM struct {
	Name, Controller string
	DiskSize         int64
	NIC              string
	Firmware         string // "bios" (default) or "efi"
	GuestID          string // vSphere's guest OS type (default otherGuest)
}

// CreateVMWith adds a powered-off VM shaped by vm on the first datastore.
func (l *Lab) CreateVMWith(ctx context.Context, vm VM) {
	name := vm.Name
	var dss []mo.Datastore
	l.Retrieve(ctx, "Datastore", []string{"name"}, &dss)
	var dcs []mo.Datacenter
	l.Retrieve(ctx, "Datacenter", []string{"vmFolder"}, &dcs)
	var pools []mo.ResourcePool
	l.Retrieve(ctx, "ResourcePool", []string{"name"}, &pools)
	ds := dss[0].Name
	var devs object.VirtualDeviceList
	var scsi types.BaseVirtualDevice
	var err error
	if vm.Controller == "nvme" {
		scsi, err = devs.CreateNVMEController()
	} else {
		scsi, err = devs.CreateSCSIController(vm.Controller)
	}
	if err != nil {
		l.t.Fatal(err)
	}
	devs = append(devs, scsi)
	disk := devs.CreateDisk(scsi.(types.BaseVirtualController), types.ManagedObjectReference{}, "["+ds+"] "+name+"/"+name+".vmdk")
	disk.CapacityInKB = vm.DiskSize / 1024
	devs = append(devs, disk)
	if vm.NIC != "" {
		f := find.NewFinder(l.c)
		dc, err := f.DefaultDatacenter(ctx)
		if err != nil {
			l.t.Fatal(err)
		}
		f.SetDatacenter(dc)
		net, err := f.Network(ctx, "VM Network")
		if err != nil {
			l.t.Fatal(err)
		}
		backing, err := net.EthernetCardBackingInfo(ctx)
		if err != nil {
			l.t.Fatal(err)
		}
		card, err := object.EthernetCardTypes().CreateEthernetCard(vm.NIC, backing)
		if err != nil {
			l.t.Fatal(err)
		}
		devs = append(devs, card)
	}
	changes, _ := devs.ConfigSpec(types.VirtualDeviceConfigSpecOperationAdd)
	for _, ch := range changes {
		if _, ok := ch.GetVirtualDeviceConfigSpec().Device.(*types.VirtualDisk); ok {
			ch.GetVirtualDeviceConfigSpec().FileOperation = types.VirtualDeviceConfigSpecFileOperationCreate
		}
	}
	guestID := vm.GuestID
	if guestID == "" {
		guestID = "otherGuest"
	}
	spec := types.VirtualMachineConfigSpec{Name: name, GuestId: guestID, NumCPUs: 1, MemoryMB: 256, Firmware: vm.Firmware,
		Files: &types.VirtualMachineFileInfo{VmPathName: "[" + ds + "]"}, DeviceChange: changes}
	task, err := object.NewFolder(l.c, dcs[0].VmFolder).CreateVM(ctx, spec, object.NewResourcePool(l.c, pools[0].Self), nil)
	if err != nil {
		l.t.Fatal(err)
	}
	if err := task.Wait(ctx); err != nil {
		l.t.Fatal(err)
	}
	var vms []mo.VirtualMachine
	l.Retrieve(ctx, "VirtualMachine", []string{"name"}, &vms)
	for _, v := range vms {
		if v.Name == name {
			l.VMs = append(l.VMs, v)
		}
	}
}

// Retrieve reads properties of every managed object of a kind.
func (l *Lab) Retrieve(ctx context.Context, kind string, props []string, dst any) {
	v, err := view.NewManager(l.c).CreateContainerView(ctx, l.c.ServiceContent.RootFolder, []string{kind}, true)
	if err != nil {
		l.t.Fatal(err)
	}
	defer func() { _ = v.Destroy(ctx) }() // a property collector
	if err := v.Retrieve(ctx, []string{kind}, props, dst); err != nil {
		l.t.Fatal(err)
	}
}

// Disk finds the flat extent of the first disk of the VM called name.
func (l *Lab) Disk(name string) Disk {
	disks := l.Disks(name)
	if len(disks) == 0 {
		l.t.Fatalf("no VM %s with a disk", name)
	}
	return disks[0]
}

// Disks finds the flat extents of every disk of the VM called name, in
// the order of its devices.
func (l *Lab) Disks(name string) []Disk {
	ctx := context.Background()
	var out []Disk
	var vms []mo.VirtualMachine
	l.Retrieve(ctx, "VirtualMachine", []string{"name", "config.hardware.device"}, &vms)
	for _, vm := range vms {
		if vm.Name != name {
			continue
		}
		for _, dev := range vm.Config.Hardware.Device {
			d, ok := dev.(*types.VirtualDisk)
			if !ok {
				continue
			}
			b := d.Backing.(*types.VirtualDiskFlatVer2BackingInfo)
			var ds mo.Datastore
			if err := property.DefaultCollector(l.c).RetrieveOne(ctx, *b.Datastore, []string{"summary"}, &ds); err != nil {
				l.t.Fatal(err)
			}
			dir, _ := url.Parse(ds.Summary.Url)
			_, rel, _ := strings.Cut(b.FileName, "] ")
			out = append(out, Disk{Path: filepath.Join(dir.Path, strings.TrimSuffix(rel, ".vmdk")+"-flat.vmdk"), Size: d.CapacityInKB * 1024})
		}
	}
	return out
}

// WriteFlat writes a disk's contents, as the guest would.
func (l *Lab) WriteFlat(d Disk, data []byte) {
	if err := os.WriteFile(d.Path, data, 0o600); err != nil {
		l.t.Fatal(err)
	}
}

// ReadFlat reads a disk's contents.
func (l *Lab) ReadFlat(d Disk) []byte {
	b, err := os.ReadFile(d.Path)
	if err != nil {
		l.t.Fatal(err)
	}
	return b
}

// Power powers a VM on or off.
func (l *Lab) Power(vm mo.VirtualMachine, on bool) {
	ctx := context.Background()
	v := object.NewVirtualMachine(l.c, vm.Self)
	task, err := v.PowerOff(ctx)
	if on {
		task, err = v.PowerOn(ctx)
	}
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		l.t.Fatal(err)
	}
}

// Password is the simulator's password for the user coffer (Start).
const Password = "s3cret"

// Connection is a configuration's connections section with a connection
// called name to the lab, its password in passwordFile (written here).
func (l *Lab) Connection(name, passwordFile string) string {
	l.t.Helper()
	if err := os.WriteFile(passwordFile, []byte(Password+"\n"), 0o600); err != nil {
		l.t.Fatal(err)
	}
	return fmt.Sprintf(`connections:
  - name: %s
    kind: vsphere
    options: {url: %q, user: coffer, password-file: %q, thumbprint: %q}
`, name, l.SDK, passwordFile, l.Thumbprint)
}

// removableDatastores gives vcsim's HostDatastoreSystem the
// RemoveDatastore call that vcsim lacks (it answers MethodNotFound), for
// the instant recoveries that unmount their NFS datastore: like
// vSphere's, it refuses a datastore a VM still uses (one whose datastore
// property names it), then removes it with vcsim's Destroy_Task. The
// datastore's own list of VMs is not trusted: vcsim's RelocateVM_Task
// takes the VM off the target datastore's list instead of the source's.
type removableDatastores struct{ *simulator.HostDatastoreSystem }

// RemovableDatastores gives every host of m's the RemoveDatastore call
// (removableDatastores).
func RemovableDatastores(m *simulator.Model) {
	for _, obj := range m.Map().All("HostSystem") {
		h := obj.(*simulator.HostSystem)
		m.Map().Put(&removableDatastores{m.Map().Get(*h.ConfigManager.DatastoreSystem).(*simulator.HostDatastoreSystem)})
	}
}

func (d *removableDatastores) RemoveDatastore(ctx *simulator.Context, req *types.RemoveDatastore) soap.HasFault {
	ds := ctx.Map.Get(req.Datastore).(*simulator.Datastore)
	for _, obj := range ctx.Map.All("VirtualMachine") {
		for _, used := range obj.(*simulator.VirtualMachine).Datastore {
			if used == req.Datastore {
				return &methods.RemoveDatastoreBody{Fault_: simulator.Fault("in use", &types.ResourceInUse{Type: "Datastore", Name: ds.Name})}
			}
		}
	}
	ds.Vm = nil
	body := ds.DestroyTask(ctx, &types.Destroy_Task{This: req.Datastore}).(*methods.Destroy_TaskBody)
	task := ctx.Map.Get(body.Res.Returnval).(*simulator.Task)
	task.Wait()
	if task.Info.Error != nil {
		return &methods.RemoveDatastoreBody{Fault_: simulator.Fault(task.Info.Error.LocalizedMessage, task.Info.Error.Fault)}
	}
	return &methods.RemoveDatastoreBody{Res: &types.RemoveDatastoreResponse{}}
}
