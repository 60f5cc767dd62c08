package vsphere

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/ranged"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/testutil"
)

const killedRestore = "vm-0000-restored"

// TestKilledRangedRestoreResumes runs a hot-add restore of the two-disk
// point in a child process and SIGKILLs it in the middle of the thin
// disk, the full disk written and journalled. The next start's cleanup
// detaches the disk the killed restore had attached, and `--resume`
// (Resume) takes the half-restored VM up again: the disks end equal to
// the point, and the resumed run sends only the data of the disk the
// kill cut short, not the journalled one again.
func TestKilledRangedRestoreResumes(t *testing.T) {
	l := startRangedLab(t)
	state := filepath.Join(t.TempDir(), "state")
	dirs, _ := json.Marshal(l.s.dsDirs)
	testutil.KillAtPoint(t, "TestRangedRestoreKillChild", "KILL_URL="+l.s.url.String(), "KILL_THUMB="+l.s.thumb,
		"KILL_STATE="+state, "KILL_DATASTORES="+string(dirs), "KILL_REPO="+l.repoDir,
		"KILL_POINT="+l.point.ID.String(), "KILL_MOVER="+l.mover.Value)

	// What the kill left: the VM's journal, with the progress of the
	// full disk only (the thin one had committed nothing), and the thin
	// disk still attached to the data mover.
	rec, err := ranged.Find(state, killedRestore, l.point.ID.String())
	if err != nil {
		t.Fatal(err)
	}
	progress, _ := filepath.Glob(filepath.Join(ranged.Dir(state, rec.VM), "disk-*.json"))
	if len(progress) != 1 || !strings.HasSuffix(progress[0], killedRestore+"_0_vmdk.json") {
		t.Fatalf("progress journalled at the kill: %v, want disk 0's only", progress)
	}
	if n := len((&hostLab{s: l.s}).moverDisks(t, l.mover)); n != 2 {
		t.Fatalf("the data mover has %d disks after the kill, want its own and the thin disk", n)
	}

	c := l.connect(t, state, &writeDevices{})
	left, err := c.CleanupLeftovers(context.Background())
	if err != nil || len(left) != 1 || left[0].Kind != "hot-added-disk" || !strings.Contains(left[0].Name, killedRestore+"_1.vmdk") {
		t.Fatalf("the next start's cleanup: %+v, %v", left, err)
	}
	nv, err := l.restore(t, c, hypervisor.NewVMOptions{Name: killedRestore, Streams: 1, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	if nv.ref.Value != rec.VM {
		t.Fatalf("resumed into %s, not the killed restore's VM %s", nv.ref.Value, rec.VM)
	}
	l.check(t, nv, state)
	st, data := nv.RestoreStats(), pointData(t, l)
	if st.Resumed != rangedDisk || st.Written != data-rangedDisk {
		t.Fatalf("the resumed run %+v for %d bytes of data, the full disk's %d journalled", st, data, rangedDisk)
	}
	t.Logf("resumed run sent %d bytes of the point's %d (%d already written)", st.Written, data, st.Resumed)
}

// TestRangedRestoreKillChild is the child of
// TestKilledRangedRestoreResumes. It rebuilds the lab from what the
// parent passes (the simulator's address and datastore directories, the
// repository, the data mover), restores the full disk, then the thin
// one, and stops at the thin disk's second piece to be killed. The disks
// go one after the other, not at once as restoreops writes them, so that
// the kill finds one disk journalled and the other cut short.
func TestRangedRestoreKillChild(t *testing.T) {
	testutil.KillChild(t)
	ctx := context.Background()
	s := attachSim(t)
	l := &rangedLab{s: s, r: (&repotest.Local{Dir: os.Getenv("KILL_REPO")}).Reopen(t),
		mover: types.ManagedObjectReference{Type: "VirtualMachine", Value: os.Getenv("KILL_MOVER")}}
	pid, err := id.Parse(os.Getenv("KILL_POINT"))
	if err == nil {
		l.point, err = l.r.LoadPoint(ctx, pid)
	}
	if err != nil {
		t.Fatal(err)
	}
	c := s.connect(t, func(cfg *Config) { cfg.DataMoverVM, cfg.StateDir = moverName, os.Getenv("KILL_STATE") })
	c.transport.(*HotAdd).Devices = &writeDevices{s: s, mover: l.mover}
	orig := newDeviceTarget
	newDeviceTarget = func(f *os.File) ranged.Target {
		if filepath.Base(f.Name()) == killedRestore+"_1-flat.vmdk" {
			return stallingTarget{Target: orig(f), at: 1 << 20}
		}
		return orig(f)
	}
	var cfg hypervisor.VMConfig
	if err := json.Unmarshal(l.point.VMConfig, &cfg); err != nil {
		t.Fatal(err)
	}
	nv, err := c.CreateVM(ctx, cfg, hypervisor.NewVMOptions{Name: killedRestore, Point: l.point.ID.String(), Streams: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range l.point.Disks {
		src, err := restore.OpenDisk(ctx, l.r, d, 0)
		if err == nil {
			err = nv.WriteDisk(ctx, d.Key, src)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("the restore ended instead of being killed")
}

// stallingTarget stops the process for its kill at the first write at or
// past at.
type stallingTarget struct {
	ranged.Target
	at int64
}

func (s stallingTarget) WriteAt(p []byte, off int64) (int, error) {
	if off >= s.at {
		testutil.KillPoint()
	}
	return s.Target.WriteAt(p, off)
}

// attachSim is the simulator of the parent process, as a child sees it:
// its address and datastore directories, and an admin client of its own.
func attachSim(t *testing.T) *sim {
	ctx := context.Background()
	u, err := url.Parse(os.Getenv("KILL_URL"))
	if err != nil {
		t.Fatal(err)
	}
	s := &sim{t: t, url: u, thumb: os.Getenv("KILL_THUMB")}
	if err := json.Unmarshal([]byte(os.Getenv("KILL_DATASTORES")), &s.dsDirs); err != nil {
		t.Fatal(err)
	}
	if s.client, err = vim25.NewClient(ctx, soap.NewClient(u, true)); err != nil {
		t.Fatal(err)
	}
	if _, err := methods.Login(ctx, s.client, &types.Login{This: *s.client.ServiceContent.SessionManager,
		UserName: simUser, Password: simPass}); err != nil {
		t.Fatal(err)
	}
	return s
}
