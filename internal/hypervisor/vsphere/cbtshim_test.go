package vsphere

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"github.com/vmware/govmomi/vim25/xml"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// cbtShim stands in for ESXi's changed block tracking, which vcsim lacks
// (QueryChangedDiskAreas is MethodNotFound there). It is an HTTPS reverse
// proxy in front of the simulator that answers QueryChangedDiskAreas itself
// and passes everything else through, /folder data included.
//
// Tests change disks only through write, which puts the bytes into the
// disk's flat file and records the range in a new change epoch; the disk's
// changeId in the simulator ("<uuid>/<epoch>") moves with it, so a snapshot
// taken afterwards carries that changeId in its configuration, as on ESXi.
// The answer for (snapshot, changeId) is then the union of the ranges
// written after changeId's epoch up to the snapshot's: exactly what ESXi
// reports, derived from the bytes the test wrote, not hard-coded.
//
// It also stands in for the memory image ESXi writes for a with-memory
// snapshot: vcsim records the snapshot's memory flag but creates only an
// empty .vmsn (and no .vmem). A test registers the image for a VM with
// setMemoryImage; GET and HEAD of that VM's snapshot .vmsn/.vmem files
// under /folder are then answered from the registered bytes (memory_test.go).
type cbtShim struct {
	s      *sim
	server *httptest.Server
	url    *url.URL
	thumb  string
	// PageAreas caps the areas per answer, so callers must follow pages.
	PageAreas int

	mu      sync.Mutex
	disks   map[string]*cbtDisk // "<vm moref>/<device key>"
	queries int
	memory  map[string]memoryImage // by VM moref
}

type cbtDisk struct {
	uuid   string
	epoch  int
	writes map[int][]hypervisor.Extent // ranges written in each epoch
}

func newCBTShim(t testing.TB, s *sim) *cbtShim {
	sh := &cbtShim{s: s, disks: map[string]*cbtDisk{}, PageAreas: 2, memory: map[string]memoryImage{}}
	backend := &url.URL{Scheme: s.url.Scheme, Host: s.url.Host}
	proxy := httputil.NewSingleHostReverseProxy(backend)
	proxy.Transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} // the test's own simulator
	sh.server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sh.serveMemory(w, r) {
			return
		}
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/sdk") {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte("QueryChangedDiskAreas")) {
				sh.answer(w, body)
				return
			}
			if bytes.Contains(body, []byte("layoutEx")) {
				sh.addVMEM(t)
			}
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(sh.server.Close)
	sh.url, _ = url.Parse(sh.server.URL + s.url.Path)
	sh.thumb = soap.ThumbprintSHA256(sh.server.Certificate())
	return sh
}

// connect opens a connector through the shim.
func (sh *cbtShim) connect(t testing.TB, mod func(*Config)) *Connector {
	return sh.s.connect(t, func(c *Config) {
		c.URL, c.Thumbprint = sh.url.String(), sh.thumb
		if mod != nil {
			mod(c)
		}
	})
}

// simVM is the simulator's own object for a VM (for direct changes).
func (sh *cbtShim) simVM(ref types.ManagedObjectReference) *simulator.VirtualMachine {
	return sh.s.model.Map().Get(ref).(*simulator.VirtualMachine)
}

// disk returns the tracking state of a VM's disk, creating it on first use.
func (sh *cbtShim) disk(vm types.ManagedObjectReference, key int32) *cbtDisk {
	id := vm.Value + "/" + strconv.Itoa(int(key))
	d := sh.disks[id]
	if d == nil {
		d = &cbtDisk{uuid: fmt.Sprintf("52 %02x %04x", len(sh.disks), key), writes: map[int][]hypervisor.Extent{}}
		sh.disks[id] = d
	}
	return d
}

// write stores data at off in the VM's disk (the index-th disk) and
// advances its changeId.
func (sh *cbtShim) write(t testing.TB, vm types.ManagedObjectReference, index int, off int64, data []byte) {
	t.Helper()
	sh.mu.Lock()
	defer sh.mu.Unlock()
	key, file := sh.diskFile(t, vm, index)
	f, err := os.OpenFile(file, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
	f.Close()
	d := sh.disk(vm, key)
	d.epoch++
	d.writes[d.epoch] = append(d.writes[d.epoch], hypervisor.Extent{Offset: off, Length: int64(len(data))})
	sh.setChangeID(vm, key, d)
}

// reset makes the disk's tracking start over (what ESXi does after, for
// example, a crash of the host or a storage vMotion): older changeIds are
// refused from now on.
func (sh *cbtShim) reset(t testing.TB, vm types.ManagedObjectReference, index int) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	key, _ := sh.diskFile(t, vm, index)
	d := sh.disk(vm, key)
	all := d.union(0, d.epoch)
	d.uuid += "r"
	d.epoch = 1
	d.writes = map[int][]hypervisor.Extent{1: all}
	sh.setChangeID(vm, key, d)
}

// read returns the current bytes of the VM's disk.
func (sh *cbtShim) read(t testing.TB, vm types.ManagedObjectReference, index int) []byte {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	_, file := sh.diskFile(t, vm, index)
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// diskFile finds the key and local flat file of the index-th disk.
func (sh *cbtShim) diskFile(t testing.TB, vm types.ManagedObjectReference, index int) (int32, string) {
	var key int32
	var name string
	v := sh.simVM(vm)
	sh.s.model.Map().WithLock(sh.s.model.Service.Context, v, func() {
		disks := shimDisks(v.Config.Hardware.Device)
		if index < len(disks) {
			key = disks[index].Key
			name = disks[index].Backing.(*types.VirtualDiskFlatVer2BackingInfo).FileName
		}
	})
	ds, p, ok := strings.Cut(strings.TrimPrefix(name, "["), "] ")
	if !ok {
		t.Fatalf("VM %s has no disk %d", vm.Value, index)
	}
	return key, filepath.Join(sh.s.dsDirs[ds], strings.TrimSuffix(p, ".vmdk")+"-flat.vmdk")
}

func (sh *cbtShim) setChangeID(vm types.ManagedObjectReference, key int32, d *cbtDisk) {
	v := sh.simVM(vm)
	sh.s.model.Map().WithLock(sh.s.model.Service.Context, v, func() {
		for _, vd := range shimDisks(v.Config.Hardware.Device) {
			if vd.Key == key {
				vd.Backing.(*types.VirtualDiskFlatVer2BackingInfo).ChangeId = fmt.Sprintf("%s/%d", d.uuid, d.epoch)
			}
		}
	})
}

// union merges the ranges written in epochs (from, to].
func (d *cbtDisk) union(from, to int) []hypervisor.Extent {
	var all []hypervisor.Extent
	for e := from + 1; e <= to; e++ {
		all = append(all, d.writes[e]...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Offset < all[j].Offset })
	var out []hypervisor.Extent
	for _, x := range all {
		if n := len(out); n > 0 && x.Offset <= out[n-1].Offset+out[n-1].Length {
			out[n-1].Length = max(out[n-1].Length, x.Offset+x.Length-out[n-1].Offset)
			continue
		}
		out = append(out, x)
	}
	return out
}

// answer serves one QueryChangedDiskAreas call.
func (sh *cbtShim) answer(w http.ResponseWriter, body []byte) {
	m, err := simulator.UnmarshalBody(types.TypeFunc(), body)
	if err != nil {
		sh.fault(w, "InvalidRequest", "", err.Error())
		return
	}
	req := m.Body.(*types.QueryChangedDiskAreas)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	sh.queries++
	v := sh.simVM(req.This)
	var enabled bool
	var capacity int64
	var snapID string
	sh.s.model.Map().WithLock(sh.s.model.Service.Context, v, func() {
		enabled = v.Config.ChangeTrackingEnabled != nil && *v.Config.ChangeTrackingEnabled
	})
	if req.Snapshot == nil {
		sh.fault(w, "InvalidArgument", "snapshot", "a snapshot is required while the VM is running")
		return
	}
	snap := sh.s.model.Map().Get(*req.Snapshot).(*simulator.VirtualMachineSnapshot)
	sh.s.model.Map().WithLock(sh.s.model.Service.Context, snap, func() {
		for _, vd := range shimDisks(snap.Config.Hardware.Device) {
			if vd.Key == req.DeviceKey {
				capacity = vd.CapacityInKB * 1024
				snapID = vd.Backing.(*types.VirtualDiskFlatVer2BackingInfo).ChangeId
			}
		}
	})
	if !enabled || snapID == "" {
		sh.fault(w, "FileFault", "", "change tracking is not active for this disk")
		return
	}
	d := sh.disk(req.This, req.DeviceKey)
	uuid, epochS, _ := strings.Cut(snapID, "/")
	upTo, _ := strconv.Atoi(epochS)
	from := 0
	if req.ChangeId != "*" {
		u, e, ok := strings.Cut(req.ChangeId, "/")
		n, err := strconv.Atoi(e)
		if !ok || err != nil || u != uuid || u != d.uuid || n > upTo {
			sh.fault(w, "InvalidArgument", "changeId", "changeId "+req.ChangeId+" is not valid for this disk")
			return
		}
		from = n
	}
	var areas []types.DiskChangeExtent
	for _, x := range d.union(from, upTo) {
		if x.Offset+x.Length <= req.StartOffset {
			continue
		}
		if x.Offset < req.StartOffset {
			x.Length -= req.StartOffset - x.Offset
			x.Offset = req.StartOffset
		}
		areas = append(areas, types.DiskChangeExtent{Start: x.Offset, Length: x.Length})
	}
	info := types.DiskChangeInfo{StartOffset: req.StartOffset, Length: capacity - req.StartOffset}
	if len(areas) > sh.PageAreas {
		info.Length = areas[sh.PageAreas].Start - req.StartOffset
		areas = areas[:sh.PageAreas]
	}
	info.ChangedArea = areas
	env := struct {
		XMLName xml.Name `xml:"http://schemas.xmlsoap.org/soap/envelope/ Envelope"`
		Body    struct {
			Res *types.QueryChangedDiskAreasResponse `xml:"urn:vim25 QueryChangedDiskAreasResponse"`
		} `xml:"http://schemas.xmlsoap.org/soap/envelope/ Body"`
	}{}
	env.Body.Res = &types.QueryChangedDiskAreasResponse{Returnval: info}
	out, _ := xml.Marshal(env)
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.Write(append([]byte(xml.Header), out...))
}

// fault answers with a SOAP fault of the given vim type, as ESXi does for
// a changeId it no longer accepts.
func (sh *cbtShim) fault(w http.ResponseWriter, typ, prop, msg string) {
	detail := fmt.Sprintf(`<%sFault xmlns="urn:vim25" xsi:type="%s">`, typ, typ)
	if prop != "" {
		detail += "<invalidProperty>" + prop + "</invalidProperty>"
	}
	detail += fmt.Sprintf("</%sFault>", typ)
	var esc bytes.Buffer
	xml.EscapeText(&esc, []byte(msg))
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	w.WriteHeader(http.StatusInternalServerError)
	fmt.Fprintf(w, `%s<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><soapenv:Body><soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>%s</faultstring><detail>%s</detail></soapenv:Fault></soapenv:Body></soapenv:Envelope>`,
		xml.Header, esc.String(), detail)
}

// Queries reports how many QueryChangedDiskAreas calls the shim answered.
func (sh *cbtShim) Queries() int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.queries
}

func shimDisks(devs []types.BaseVirtualDevice) []*types.VirtualDisk {
	var out []*types.VirtualDisk
	for _, d := range devs {
		if vd, ok := d.(*types.VirtualDisk); ok {
			out = append(out, vd)
		}
	}
	return out
}

// TestCBTShim checks the shim against vSphere's documented semantics with
// raw API calls, independent of the connector.
func TestCBTShim(t *testing.T) {
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 1})
	sh := newCBTShim(t, s)
	ctx := context.Background()
	vm := object.NewVirtualMachine(s.client, s.vms[0])
	tk, _ := vm.Reconfigure(ctx, types.VirtualMachineConfigSpec{ChangeTrackingEnabled: types.NewBool(true)})
	if err := tk.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	sh.write(t, s.vms[0], 0, 0, []byte("a"))
	sh.write(t, s.vms[0], 0, 1<<20, make([]byte, 4096))
	sh.write(t, s.vms[0], 0, 3<<20, []byte("c"))
	snap := func() (types.ManagedObjectReference, string) {
		tk, _ := vm.CreateSnapshot(ctx, "t", "", false, false)
		info, err := tk.WaitForResult(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ref := info.Result.(types.ManagedObjectReference)
		var ms mo.VirtualMachineSnapshot
		s.pc().RetrieveOne(ctx, ref, []string{"config.hardware.device"}, &ms)
		return ref, shimDisks(ms.Config.Hardware.Device)[0].Backing.(*types.VirtualDiskFlatVer2BackingInfo).ChangeId
	}
	query := func(sn types.ManagedObjectReference, cid string) ([]types.DiskChangeExtent, int, error) {
		var out []types.DiskChangeExtent
		pages := 0
		for off := int64(0); off < s.opts.DiskSize; {
			res, err := methods.QueryChangedDiskAreas(ctx, sh.s.client.RoundTripper, &types.QueryChangedDiskAreas{
				This: s.vms[0], Snapshot: &sn, DeviceKey: shimDisks(sh.simVM(s.vms[0]).Config.Hardware.Device)[0].Key,
				StartOffset: off, ChangeId: cid})
			if err != nil {
				return nil, pages, err
			}
			pages++
			out = append(out, res.Returnval.ChangedArea...)
			off = res.Returnval.StartOffset + res.Returnval.Length
		}
		return out, pages, nil
	}
	// The admin client talks to vcsim directly; point it at the shim.
	sc := soap.NewClient(sh.url, true)
	sc.Jar = s.client.Client.Jar
	sh.s.client.RoundTripper = sc
	s1, cid1 := snap()
	all, pages, err := query(s1, "*")
	if err != nil || len(all) != 3 || pages != 2 || all[1].Start != 1<<20 || all[1].Length != 4096 {
		t.Fatalf("*: %+v pages %d err %v", all, pages, err)
	}
	vm.RemoveSnapshot(ctx, "t", false, nil)
	sh.write(t, s.vms[0], 0, 2<<20, []byte("new"))
	s2, _ := snap()
	ch, _, err := query(s2, cid1)
	if err != nil || len(ch) != 1 || ch[0].Start != 2<<20 || ch[0].Length != 3 {
		t.Fatalf("since %s: %+v %v", cid1, ch, err)
	}
	sh.reset(t, s.vms[0], 0)
	if _, _, err := query(s2, cid1); err == nil {
		t.Fatal("stale changeId accepted after a reset")
	}
}
