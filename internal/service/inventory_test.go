package service_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/vmware/govmomi"
	vmfind "github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/qmp"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/fleetops"
	"github.com/coffer-backup/coffer/internal/service/planops"
	"github.com/coffer-backup/coffer/internal/service/servicetest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// invSim is a vCenter simulator and a client of it that changes its
// fleet the way an administrator would.
type invSim struct {
	srv    *simulator.Server
	finder *vmfind.Finder
	client *govmomi.Client // the test's own session
}

func startInvSim(t *testing.T) *invSim {
	t.Helper()
	m := simulator.VPX()
	m.Host, m.ClusterHost, m.Machine, m.Autostart = 0, 2, 14, false
	if err := m.Create(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Remove)
	m.Service.TLS = new(tls.Config)
	m.Service.Listen = &url.URL{User: url.UserPassword("coffer", "s3cret")}
	srv := m.Service.NewServer()
	t.Cleanup(srv.Close)
	c, err := govmomi.NewClient(context.Background(), srv.URL, true)
	if err != nil {
		t.Fatal(err)
	}
	f := vmfind.NewFinder(c.Client)
	dc, err := f.DefaultDatacenter(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	f.SetDatacenter(dc)
	return &invSim{srv: srv, finder: f, client: c}
}

// config is a configuration with the simulator as connection vc and a
// policy selecting invSelect, its password in a file in dir.
func (s *invSim) config(t *testing.T, dir string) string {
	t.Helper()
	pw := filepath.Join(dir, "vc.password")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sdk := url.URL{Scheme: s.srv.URL.Scheme, Host: s.srv.URL.Host, Path: s.srv.URL.Path}
	return fmt.Sprintf(`connections:
  - name: vc
    kind: vsphere
    options: {url: %q, user: coffer, password-file: %q, thumbprint: %q}
policies:
  - name: ones
    connection: vc
    select: {names: [%q]}
`, sdk.String(), pw, soap.ThumbprintSHA256(s.srv.Certificate()), invSelect)
}

// TestOneShotConnectionsLogOut: what opens a connection for one request
// (an inventory refresh, a policy check, a policy preview) ends
// its vCenter session, so that a server answering requests does not pile
// sessions up until vCenter refuses logins.
func TestOneShotConnectionsLogOut(t *testing.T) {
	sim := startInvSim(t)
	e := newConfEnv(t, "")
	e.file = sim.config(t, e.dir)
	s := e.service()
	for range 3 {
		if _, err := (fleetops.Ops{Service: s}).RefreshInventory(e.ctx, &api.RefreshInventoryInput{Connection: "vc"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := (planops.Ops{Service: s}).PolicyCheck(e.ctx, &api.CheckPoliciesInput{Offline: false}); err != nil {
		t.Fatal(err)
	}
	if _, err := (planops.Ops{Service: s}).PolicyPreview(e.ctx, &api.PreviewPolicyInput{PolicyParam: api.PolicyParam{Policy: "ones"}}); err != nil {
		t.Fatal(err)
	}
	if n := sim.sessions(t); n != 1 {
		t.Fatalf("%d sessions on the simulator after the requests ended, want the test's own alone", n)
	}
}

// sessions counts the simulator's logged-in sessions, the test's own
// among them.
func (s *invSim) sessions(t *testing.T) int {
	t.Helper()
	var sm mo.SessionManager
	pc := property.DefaultCollector(s.client.Client)
	if err := pc.RetrieveOne(context.Background(), *s.client.ServiceContent.SessionManager, []string{"sessionList"}, &sm); err != nil {
		t.Fatal(err)
	}
	return len(sm.SessionList)
}

// names lists the simulator's VMs as the simulator sees them.
func (s *invSim) names(t *testing.T) []string {
	t.Helper()
	vms, err := s.finder.VirtualMachineList(context.Background(), "*")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, vm := range vms {
		out = append(out, vm.Name())
	}
	slices.Sort(out)
	return out
}

func (s *invSim) destroy(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	vm, err := s.finder.VirtualMachine(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	task, err := vm.Destroy(ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func vmNames(vms []api.VM) []string {
	out := []string{}
	for _, v := range vms {
		out = append(out, v.VM)
	}
	slices.Sort(out)
	return out
}

// invSelect is the pattern of the test's policy.
const invSelect = "*_VM1"

// TestInventoryFromVCSim refreshes the inventory of a vCenter simulator's
// connection into the catalog and reads it back: every VM the simulator
// has, paged by keyset and filtered; a VM removed from the fleet leaves
// at the next refresh; a refresh that fails leaves the list it had, with
// its error and age shown. Each refresh asked for is a task.
func TestInventoryFromVCSim(t *testing.T) {
	sim := startInvSim(t)
	e := newConfEnv(t, "")
	e.file = sim.config(t, e.dir)
	s := e.service()
	ctx := e.ctx

	// Never listed: the first read lists it rather than answer nothing.
	want := sim.names(t)
	if len(want) < 10 {
		t.Fatalf("the simulator has %d VMs: too few to page through", len(want))
	}
	inv, err := servicetest.ListVMs(ctx, s, api.ListVMsInput{})
	if err != nil {
		t.Fatal(err)
	}
	same(t, "first read", vmNames(inv.VMs), want)
	if len(inv.Connections) != 1 || inv.Connections[0].RefreshedAt.IsZero() || inv.Connections[0].VMs != len(want) {
		t.Fatalf("connection state %+v", inv.Connections)
	}
	for _, vm := range inv.VMs {
		if vm.Host == "" || len(vm.Datastores) == 0 || len(vm.Disks) == 0 || vm.PowerState == "" || vm.ProvisionedBytes == 0 || vm.Busy {
			t.Fatalf("VM %+v", vm)
		}
	}

	r, err := fleetops.Ops{Service: s}.RefreshInventory(ctx, &api.RefreshInventoryInput{Connection: "vc"})
	if err != nil || r.VMs != len(want) || r.Busy != 0 {
		t.Fatalf("refresh: %+v %v", r, err)
	}

	// Pages of 3 by keyset, with each filter: the same VMs as one read.
	for _, f := range []struct {
		in   api.ListVMsInput
		keep func(string) bool
	}{
		{api.ListVMsInput{}, func(string) bool { return true }},
		{api.ListVMsInput{Protection: "protected"}, func(n string) bool { ok, _ := path.Match(invSelect, n); return ok }},
		{api.ListVMsInput{Protection: "unprotected"}, func(n string) bool { ok, _ := path.Match(invSelect, n); return !ok }},
		{api.ListVMsInput{Name: "c0_rp0_vm"}, func(n string) bool { return strings.Contains(strings.ToLower(n), "c0_rp0_vm") }},
		{api.ListVMsInput{Connections: []string{"vc"}, Name: "VM2", Protection: "unprotected"},
			func(n string) bool { ok, _ := path.Match(invSelect, n); return !ok && strings.Contains(n, "VM2") }},
	} {
		var expected []string
		for _, n := range want {
			if f.keep(n) {
				expected = append(expected, n)
			}
		}
		if len(expected) == 0 {
			t.Fatalf("filter %+v selects nothing: the test proves nothing", f.in)
		}
		var got []api.VM
		in := f.in
		in.Limit = 3
		for range len(want) + 1 {
			page, err := servicetest.ListVMs(ctx, s, in)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, page.VMs...)
			if page.Next == "" {
				break
			}
			in.After = page.Next
		}
		same(t, fmt.Sprintf("pages of %+v", f.in), vmNames(got), expected)
		for _, vm := range got {
			if selected, _ := path.Match(invSelect, vm.VM); slices.Contains(vm.Policies, "ones") != selected {
				t.Fatalf("%s: policies %v", vm.VM, vm.Policies)
			}
		}
	}
	if _, err := servicetest.ListVMs(ctx, s, api.ListVMsInput{After: "not-a-cursor"}); service.Classify(err) != api.Invalid {
		t.Fatalf("a bad cursor: %v", err)
	}
	if _, err := servicetest.ListVMs(ctx, s, api.ListVMsInput{Connections: []string{"nope"}}); service.Classify(err) != api.Invalid {
		t.Fatalf("an unknown connection: %v", err)
	}

	// A VM removed from the fleet disappears at the next refresh.
	gone := want[len(want)/2]
	sim.destroy(t, gone)
	if _, err := (fleetops.Ops{Service: s}).RefreshInventory(ctx, &api.RefreshInventoryInput{Connection: "vc"}); err != nil {
		t.Fatal(err)
	}
	inv, err = servicetest.ListVMs(ctx, s, api.ListVMsInput{})
	if err != nil {
		t.Fatal(err)
	}
	remaining := sim.names(t)
	if slices.Contains(remaining, gone) {
		t.Fatalf("the simulator still has %s", gone)
	}
	same(t, "after a VM was removed", vmNames(inv.VMs), remaining)
	listedAt := inv.Connections[0].RefreshedAt

	// The hypervisor goes away: the refresh fails, the list stays, and
	// the read says why and since when.
	sim.srv.Close()
	if _, err := (fleetops.Ops{Service: s}).RefreshInventory(ctx, &api.RefreshInventoryInput{Connection: "vc"}); err == nil {
		t.Fatal("a refresh of a stopped vCenter succeeded")
	}
	inv, err = servicetest.ListVMs(ctx, s, api.ListVMsInput{})
	if service.Classify(err) != api.Partial || inv == nil {
		t.Fatalf("read after a failed refresh: %v", err)
	}
	same(t, "the stale list", vmNames(inv.VMs), remaining)
	st := inv.Connections[0]
	if st.Error == "" || !st.RefreshedAt.Equal(listedAt) || !st.AttemptedAt.After(listedAt) || len(inv.Errors) != 1 ||
		!strings.Contains(inv.Errors[0].Error, st.Error) {
		t.Fatalf("state after a failed refresh: %+v, errors %+v", st, inv.Errors)
	}

	// The refreshes asked for are tasks: two succeeded, one failed.
	jobs, err := servicetest.ListJobs(ctx, s, &api.ListJobsInput{Kind: "inventory-refresh"})
	if err != nil {
		t.Fatal(err)
	}
	var statuses []string
	for _, j := range jobs {
		statuses = append(statuses, j.Status)
	}
	slices.Sort(statuses)
	same(t, "refresh tasks", statuses, []string{"failed", "success", "success"})
	if _, err := (fleetops.Ops{Service: s}).RefreshInventory(ctx, &api.RefreshInventoryInput{Connection: "nope"}); service.Classify(err) != api.NotFound {
		t.Fatalf("refresh of an unknown connection: %v", err)
	}
}

// TestInventoryFromVCSimOnPostgres runs them on a PostgreSQL catalog.
func TestInventoryFromVCSimOnPostgres(t *testing.T) {
	onPostgres(t, map[string]func(*testing.T){"FromVCSim": TestInventoryFromVCSim, "ServerRefreshes": TestServerRefreshesTheInventory})
}

func same[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got  %v\n want %v", what, got, want)
	}
}

// TestInventoryKeepsABusyQEMUVM lists a real QEMU process's VM, then
// lists it again while another client holds its monitor (as a backup in
// another process does: QEMU serves one QMP client at a time): the VM
// stays in the inventory with its last known state, marked busy, until a
// refresh describes it again.
func TestInventoryKeepsABusyQEMUVM(t *testing.T) {
	qemuBin := testutil.RequireBinary(t, "qemu-system-x86_64")
	dir := t.TempDir()
	sock, pidFile := filepath.Join(dir, "qmp.sock"), filepath.Join(dir, "qemu.pid")
	const uuid = "6b1d3c0e-0000-4000-8000-0000000000aa"
	// -daemonize returns once the monitor listens.
	out, err := exec.Command(qemuBin, "-machine", "none", "-nodefaults", "-display", "none", "-name", "busy-1", "-uuid", uuid,
		"-qmp", "unix:"+sock+",server=on,wait=off", "-daemonize", "-pidfile", pidFile).CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	e := newConfEnv(t, fmt.Sprintf("connections:\n  - name: kvm\n    kind: qemu\n    options: {sockets: [%q]}\n", sock))
	s := e.service()
	ctx := e.ctx
	refresh := func(wantBusy int) api.VM {
		t.Helper()
		r, err := fleetops.Ops{Service: s}.RefreshInventory(ctx, &api.RefreshInventoryInput{Connection: "kvm"})
		if err != nil || r.VMs != 1 || r.Busy != wantBusy {
			t.Fatalf("refresh: %+v %v, want 1 VM, %d busy", r, err, wantBusy)
		}
		inv, err := servicetest.ListVMs(ctx, s, api.ListVMsInput{})
		if err != nil || len(inv.VMs) != 1 {
			t.Fatalf("inventory: %+v %v", inv, err)
		}
		return inv.VMs[0]
	}
	described := refresh(0)
	if described.VM != "busy-1" || described.VMID != uuid || described.Busy || described.PowerState == "" {
		t.Fatalf("the VM described: %+v", described)
	}

	holder, err := qmp.Dial(ctx, sock)
	if err != nil {
		t.Fatal(err)
	}
	busy := refresh(1)
	if !busy.Busy {
		t.Fatalf("a VM whose monitor is held is not marked busy: %+v", busy)
	}
	busy.Busy = false
	same(t, "the busy VM's last known state", busy, described)

	holder.Close()
	if again := refresh(0); again.Busy {
		t.Fatalf("a VM described again stays busy: %+v", again)
	}
}

// TestServerRefreshesTheInventory: the server keeps the inventory of its
// connections in the catalog by itself, every inventory-every: a VM
// removed from the fleet leaves it without anyone asking.
func TestServerRefreshesTheInventory(t *testing.T) {
	sim := startInvSim(t)
	e := newConfEnv(t, "")
	pw := filepath.Join(e.dir, "vc.password")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sdk := url.URL{Scheme: sim.srv.URL.Scheme, Host: sim.srv.URL.Host, Path: sim.srv.URL.Path}
	e.file = fmt.Sprintf(`connections:
  - name: vc
    kind: vsphere
    options: {url: %q, user: coffer, password-file: %q, thumbprint: %q}
maintenance:
  inventory-every: 1s
`, sdk.String(), pw, soap.ThumbprintSHA256(sim.srv.Certificate()))
	run := runServer(t, e.service())
	cat, err := catalogopen.Open(context.Background(), e.catalog)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	// Read the catalog itself: the VM view would list a connection never
	// listed on its own.
	inventory := func() []string {
		vms, err := cat.ListInventory(context.Background(), catalog.InventoryFilter{Connections: []string{"vc"}})
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, v := range vms {
			out = append(out, v.Name)
		}
		slices.Sort(out)
		return out
	}
	want := sim.names(t)
	eventually(t, run, "the server's first listing of the fleet", func() bool { return slices.Equal(inventory(), want) })
	gone := want[0]
	sim.destroy(t, gone)
	remaining := sim.names(t)
	eventually(t, run, "a VM removed from the fleet leaves the inventory", func() bool { return slices.Equal(inventory(), remaining) })
}
