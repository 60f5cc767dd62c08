package failover

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/backup/backuptest"
	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/qmp"
	"github.com/coffer-backup/coffer/internal/replica"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// site is the production side of a test: running QEMU guests, a
// repository their backups go to, and a DR directory their standbys are
// kept in.
type site struct {
	t     *testing.T
	ctx   context.Context
	dir   string
	repo  *repo.Repository
	vms   []*guestvm.VM
	disks []string
	conn  *qemu.Connector
	refs  map[string]hypervisor.VMRef
}

// newSite boots n guests named web-0.. in mode ("boot": a login prompt
// and HTTP on guestvm.BootProbePort; "write": self-verifying blocks),
// each with a NIC of its own and a guest agent.
func newSite(t *testing.T, ctx context.Context, n int, mode string) *site {
	t.Helper()
	testutil.RequireBinary(t, "qemu-system-x86_64")
	testutil.RequireBinary(t, "qemu-img")
	testutil.RequireBinary(t, "qemu-nbd")
	img, err := guestvm.Build(ctx)
	if err != nil {
		if err == guestvm.ErrNoAssets && !testutil.Strict() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	s := &site{t: t, ctx: ctx, dir: t.TempDir(), repo: repotest.New(t, repo.InitOptions{}), refs: map[string]hypervisor.VMRef{}}
	var socks []string
	for i := range n {
		disk := filepath.Join(s.dir, fmt.Sprintf("web-%d.qcow2", i))
		if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", disk, "32M").CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
		vm, err := guestvm.Start(ctx, img, guestvm.Options{Name: fmt.Sprintf("web-%d", i),
			UUID: fmt.Sprintf("7c2e4d1f-9a64-4c9f-8b62-1e2d3c4b5a6%d", i), Dir: filepath.Join(s.dir, fmt.Sprintf("vm-%d", i)),
			Mode: mode, Base: 64, Interval: 20 * time.Millisecond, GuestAgent: true,
			Extra: []string{"-netdev", "user,id=net0", "-device", fmt.Sprintf("virtio-net-pci,netdev=net0,mac=52:54:00:12:35:%02x", i)},
			Disks: []guestvm.Disk{{ID: "vda", Path: disk, Format: "qcow2"}}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(vm.Kill)
		s.vms, s.disks = append(s.vms, vm), append(s.disks, disk)
		socks = append(socks, vm.QMPPath)
	}
	marker := guestvm.BootMarker
	if mode == "write" {
		marker = "COFFER READY"
	}
	for _, vm := range s.vms {
		if _, err := vm.WaitConsole(ctx, marker); err != nil {
			t.Fatalf("%v\n%s", err, vm.Console())
		}
	}
	if s.conn, err = qemu.New(qemu.Config{Sockets: socks, StateDir: filepath.Join(s.dir, "qemu-state")}); err != nil {
		t.Fatal(err)
	}
	inv, err := s.conn.Inventory(ctx)
	if err != nil || len(inv) != n {
		t.Fatalf("inventory: %v %v", inv, err)
	}
	for _, v := range inv {
		s.refs[v.Name] = v.VMRef
	}
	return s
}

// replicate backs VM i up and brings its standby to that point.
func (s *site) replicate(i int) (*repo.Point, VM) {
	s.t.Helper()
	name := fmt.Sprintf("web-%d", i)
	p, err := backuptest.BackupVM(s.t, s.repo, s.conn, backup.VMRequest{Connection: "lab", VM: s.refs[name], Mode: "incremental",
		SnapshotMode: hypervisor.CrashConsistent, Quiesce: hypervisor.QuiesceFallback})
	if err != nil {
		s.t.Fatal(err)
	}
	var cfg hypervisor.VMConfig
	if err := json.Unmarshal(p.VMConfig, &cfg); err != nil {
		s.t.Fatal(err)
	}
	nets := map[string]string{}
	for _, n := range cfg.NICs {
		nets[n.Network] = n.Network
	}
	vm := VM{Name: name, Dir: filepath.Join(s.dir, "dr", name)}
	if _, err := replica.Run(s.ctx, s.repo, p, replica.Options{Dir: vm.Dir, Keep: 3, Networks: nets}); err != nil {
		s.t.Fatal(err)
	}
	return p, vm
}

// watchPauses records every STOP event of VM i's QEMU (a pause) until the
// test ends.
func (s *site) watchPauses(i int) func() int {
	s.t.Helper()
	cl, err := qmp.Dial(s.ctx, s.vms[i].TestQMP)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { _ = cl.Close() })
	sub := cl.Subscribe()
	stops := make(chan struct{}, 64)
	go func() {
		for {
			if _, err := sub.Wait(s.ctx, "STOP", nil); err != nil {
				return
			}
			stops <- struct{}{}
		}
	}()
	return func() int {
		var st struct {
			Status string `json:"status"`
		}
		if err := cl.Execute(s.ctx, "query-status", nil, &st); err != nil || st.Status != "running" {
			s.t.Errorf("web-%d: status %q %v", i, st.Status, err)
		}
		return len(stops)
	}
}
