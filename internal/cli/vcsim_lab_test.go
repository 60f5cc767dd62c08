package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// vcLab is the test's own view of a vcsim server: an admin client that
// creates a small VM and reads and writes disk files where vcsim keeps
// them (the datastores are local directories).
type vcLab struct {
	t   *testing.T
	c   *vim25.Client
	sdk string // the SDK URL without credentials
	vms []mo.VirtualMachine
	// thumbprint pins the simulator's certificate in coffer's config.
	thumbprint string
}

// vcDisk is a VM disk's flat extent on the local datastore directory.
type vcDisk struct {
	path string
	size int64
}

const vcLabDiskSize = 2 << 20

func newVCLab(t *testing.T, srv *simulator.Server) *vcLab {
	ctx := context.Background()
	sdk := &url.URL{Scheme: srv.URL.Scheme, Host: srv.URL.Host, Path: srv.URL.Path}
	c, err := vim25.NewClient(ctx, soap.NewClient(sdk, true)) // the test's own simulator
	if err != nil {
		t.Fatal(err)
	}
	if err := session.NewManager(c).Login(ctx, srv.URL.User); err != nil {
		t.Fatal(err)
	}
	l := &vcLab{t: t, c: c, sdk: sdk.String(), thumbprint: soap.ThumbprintSHA256(srv.Certificate())}
	l.createVM(ctx, "app-01")
	return l
}

// createVM adds a powered-off VM with one small thin disk on the first
// datastore (vcsim's own VMs have 10 GB disks).
func (l *vcLab) createVM(ctx context.Context, name string) {
	l.createVMWith(ctx, vcVM{name: name, controller: "pvscsi", diskSize: vcLabDiskSize})
}

// vcVM shapes a VM of the lab: its disk's controller (a govmomi SCSI
// controller name: pvscsi, lsilogic, lsilogic-sas, buslogic) and size,
// and a network adapter (a govmomi card name such as vmxnet3, or none).
type vcVM struct {
	name, controller string
	diskSize         int64
	nic              string
}

// createVMWith adds a powered-off VM shaped by vm on the first datastore.
func (l *vcLab) createVMWith(ctx context.Context, vm vcVM) {
	name := vm.name
	var dss []mo.Datastore
	l.retrieve(ctx, "Datastore", []string{"name"}, &dss)
	var dcs []mo.Datacenter
	l.retrieve(ctx, "Datacenter", []string{"vmFolder"}, &dcs)
	var pools []mo.ResourcePool
	l.retrieve(ctx, "ResourcePool", []string{"name"}, &pools)
	ds := dss[0].Name
	var devs object.VirtualDeviceList
	scsi, err := devs.CreateSCSIController(vm.controller)
	if err != nil {
		l.t.Fatal(err)
	}
	devs = append(devs, scsi)
	disk := devs.CreateDisk(scsi.(types.BaseVirtualController), types.ManagedObjectReference{}, "["+ds+"] "+name+"/"+name+".vmdk")
	disk.CapacityInKB = vm.diskSize / 1024
	devs = append(devs, disk)
	if vm.nic != "" {
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
		card, err := object.EthernetCardTypes().CreateEthernetCard(vm.nic, backing)
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
	spec := types.VirtualMachineConfigSpec{Name: name, GuestId: "otherGuest", NumCPUs: 1, MemoryMB: 256,
		Files: &types.VirtualMachineFileInfo{VmPathName: "[" + ds + "]"}, DeviceChange: changes}
	task, err := object.NewFolder(l.c, dcs[0].VmFolder).CreateVM(ctx, spec, object.NewResourcePool(l.c, pools[0].Self), nil)
	if err != nil {
		l.t.Fatal(err)
	}
	if err := task.Wait(ctx); err != nil {
		l.t.Fatal(err)
	}
	var vms []mo.VirtualMachine
	l.retrieve(ctx, "VirtualMachine", []string{"name"}, &vms)
	for _, v := range vms {
		if v.Name == name {
			l.vms = append(l.vms, v)
		}
	}
}

func (l *vcLab) retrieve(ctx context.Context, kind string, props []string, dst any) {
	v, err := view.NewManager(l.c).CreateContainerView(ctx, l.c.ServiceContent.RootFolder, []string{kind}, true)
	if err != nil {
		l.t.Fatal(err)
	}
	defer v.Destroy(ctx)
	if err := v.Retrieve(ctx, []string{kind}, props, dst); err != nil {
		l.t.Fatal(err)
	}
}

// disk finds the flat extent of the first disk of the VM called name.
func (l *vcLab) disk(name string) vcDisk {
	ctx := context.Background()
	var vms []mo.VirtualMachine
	l.retrieve(ctx, "VirtualMachine", []string{"name", "config.hardware.device"}, &vms)
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
			return vcDisk{path: filepath.Join(dir.Path, strings.TrimSuffix(rel, ".vmdk")+"-flat.vmdk"), size: d.CapacityInKB * 1024}
		}
	}
	l.t.Fatalf("no VM %s with a disk", name)
	return vcDisk{}
}

func (l *vcLab) writeFlat(d vcDisk, data []byte) {
	if err := os.WriteFile(d.path, data, 0o600); err != nil {
		l.t.Fatal(err)
	}
}

func (l *vcLab) readFlat(d vcDisk) []byte {
	b, err := os.ReadFile(d.path)
	if err != nil {
		l.t.Fatal(err)
	}
	return b
}

func (l *vcLab) power(vm mo.VirtualMachine, on bool) {
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

// backUp configures e with a `vc` connection to the lab and a policy `p`
// selecting vm (snapshot mode extra, "" for the default, and policy keys
// such as "immutable-for: 1d" in more), runs it and returns the job.
func (l *vcLab) backUp(e *env, vm, snapshot string, more ...string) api.Job {
	l.t.Helper()
	mode := ""
	if snapshot != "" {
		mode = "\n    snapshot: " + snapshot
	}
	for _, m := range more {
		mode += "\n    " + m
	}
	e.config(l.connection(e) + fmt.Sprintf(`policies:
  - name: p
    connection: vc%s
    select: {names: [%q]}
`, mode, vm))
	var job api.Job
	if err := json.Unmarshal([]byte(e.must("run", "p", "--json")), &job); err != nil || job.Status != "success" {
		l.t.Fatalf("run: %+v %v", job, err)
	}
	return job
}

// connection is the configuration's connections section with a `vc`
// connection to the lab (its password in a file, the state directory in
// e's directory).
func (l *vcLab) connection(e *env) string {
	l.t.Helper()
	pw := filepath.Join(e.dir, "vc.password")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		l.t.Fatal(err)
	}
	e.vars["COFFER_STATE_DIR"] = filepath.Join(e.dir, "state")
	return fmt.Sprintf(`connections:
  - name: vc
    kind: vsphere
    options: {url: %q, user: coffer, password-file: %q, thumbprint: %q}
`, l.sdk, pw, l.thumbprint)
}

// restoreLatest restores the latest backup point as a new VM through the
// connection backUp configured.
func (l *vcLab) restoreLatest(e *env) api.RestoredVM {
	l.t.Helper()
	var res api.RestoredVM
	if err := json.Unmarshal([]byte(e.must("restore", "vm", "latest", "--connection", "vc", "--json")), &res); err != nil {
		l.t.Fatal(err)
	}
	return res
}
