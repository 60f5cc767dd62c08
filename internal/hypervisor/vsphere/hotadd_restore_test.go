package vsphere

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"
	"golang.org/x/sync/errgroup"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/ranged"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/restore"
)

// writeDevices plays the data mover's OS for restores: vcsim attaches no
// real device, so the block device of an attached disk is the flat
// extent of its backing file on the simulator's datastore directory,
// with the disk's capacity (a guest sees a disk of its full size; vcsim
// creates the extent as an empty file, which a truncate makes sparse,
// allocating nothing). It answers only for a disk the data mover has,
// attached independent-persistent. With together > 1, the first
// attachments wait until that many disks are attached at once (or fail
// the restore): proof that the VM's disks are written in parallel.
type writeDevices struct {
	s        *sim
	mover    types.ManagedObjectReference
	together int

	mu      sync.Mutex
	waiting int
	all     chan struct{}
}

var descriptorSectors = regexp.MustCompile(`(?m)^RW (\d+) `)

func (f *writeDevices) Device(ctx context.Context, d AttachedDisk) (string, error) {
	devs, err := (&Connector{client: f.s.client}).devicesOf(ctx, f.mover)
	if err != nil {
		return "", err
	}
	as := attachedAs(devs, d.File)
	if len(as) != 1 {
		return "", fmt.Errorf("%s is not attached to the data mover", d.File)
	}
	if m := as[0].dev.Backing.(*types.VirtualDiskFlatVer2BackingInfo).DiskMode; m != string(types.VirtualDiskModeIndependent_persistent) {
		return "", fmt.Errorf("%s is attached %s; a restore writes it independent-persistent", d.File, m)
	}
	ds, path := splitDSPath(d.File)
	desc, err := os.ReadFile(filepath.Join(f.s.dsDirs[ds], path))
	if err != nil {
		return "", err
	}
	m := descriptorSectors.FindSubmatch(desc)
	if m == nil {
		return "", fmt.Errorf("descriptor of %s names no extent size", d.File)
	}
	sectors, _ := strconv.ParseInt(string(m[1]), 10, 64)
	flat, _ := flatExtent(path)
	dev := filepath.Join(f.s.dsDirs[ds], flat)
	if st, err := os.Stat(dev); err != nil {
		return "", err
	} else if st.Size() < sectors*512 {
		if err := os.Truncate(dev, sectors*512); err != nil {
			return "", err
		}
	}
	return dev, f.barrier(ctx)
}

// barrier holds the first together-1 attachments until the last one.
func (f *writeDevices) barrier(ctx context.Context) error {
	if f.together < 2 {
		return nil
	}
	f.mu.Lock()
	if f.all == nil {
		f.all = make(chan struct{})
	}
	f.waiting++
	all := f.all
	if f.waiting == f.together {
		close(all)
	}
	f.mu.Unlock()
	select {
	case <-all:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("only %d of %d disks were attached at once: %w", f.waiting, f.together, ctx.Err())
	}
}

// rangedLab is a VM with two disks backed up through the CBT shim, and a
// data-mover VM for hot-add restores: disk 0 full of data, disk 1 a thin
// disk with a tenth of it allocated.
type rangedLab struct {
	s       *sim
	sh      *cbtShim
	r       *repo.Repository
	repoDir string // where r is: a child process opens it too
	point   *repo.Point
	want    [][]byte
	mover   types.ManagedObjectReference
}

const rangedDisk = 24 << 20

func startRangedLab(t *testing.T) *rangedLab {
	s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 1, Disks: 2, DiskSize: rangedDisk})
	local := repotest.NewLocal(t, repo.InitOptions{})
	l := &rangedLab{s: s, sh: newCBTShim(t, s), r: local.R, repoDir: local.Dir}
	ref := s.vms[0]
	full := make([]byte, rangedDisk)
	for i := range full {
		full[i] = byte(i*7 + i>>12)
	}
	l.sh.write(t, ref, 0, 0, full)
	for off := int64(0); off < rangedDisk; off += 2560 << 10 { // 256 KiB in every 2.5 MiB
		l.sh.write(t, ref, 1, off, bytes.Repeat([]byte{byte(off>>20) | 1}, 256<<10))
	}
	l.want = [][]byte{l.sh.read(t, ref, 0), l.sh.read(t, ref, 1)}
	l.point = runBackup(t, l.r, l.sh.connect(t, nil), hypervisor.VMRef{ID: ref.Value, Name: "vm-0000"})
	l.mover = (&hostLab{s: s}).addMover(t)
	return l
}

// connect opens a hot-add connector whose data mover's devices are d.
func (l *rangedLab) connect(t *testing.T, state string, d *writeDevices) *Connector {
	c := l.sh.connect(t, func(c *Config) {
		c.DataMoverVM = moverName
		if state != "" {
			c.StateDir = state
		}
	})
	d.s, d.mover = l.s, l.mover
	c.transport.(*HotAdd).Devices = d
	return c
}

// restore restores the point as VM name the way restoreops does with a
// connector that writes disks in parallel, and completes it.
func (l *rangedLab) restore(t *testing.T, c *Connector, o hypervisor.NewVMOptions) (*newVM, error) {
	ctx := context.Background()
	var cfg hypervisor.VMConfig
	if err := json.Unmarshal(l.point.VMConfig, &cfg); err != nil {
		t.Fatal(err)
	}
	o.Point = l.point.ID.String()
	nv, err := c.CreateVM(ctx, cfg, o)
	if err != nil {
		return nil, err
	}
	if !nv.(*newVM).ParallelDisks() {
		t.Fatal("a hot-add restore does not write disks in parallel")
	}
	var g errgroup.Group
	for _, d := range l.point.Disks {
		g.Go(func() error {
			src, err := restore.OpenDisk(ctx, l.r, d, 0)
			if err != nil {
				return err
			}
			return nv.WriteDisk(ctx, d.Key, src)
		})
	}
	if err := g.Wait(); err != nil {
		return nv.(*newVM), err
	}
	return nv.(*newVM), nv.(hypervisor.Completer).Complete(ctx)
}

// check: the restored disks hold the backed-up bytes, their extents
// allocate no more than the point holds, and nothing is left attached
// or journalled.
func (l *rangedLab) check(t *testing.T, nv *newVM, state string) {
	t.Helper()
	for i, d := range l.point.Disks {
		loc := nv.disks[d.Key]
		flat, _ := flatExtent(loc.Descriptor)
		path := filepath.Join(l.s.dsDirs[loc.Datastore], flat)
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, l.want[i]) {
			t.Fatalf("disk %d of the restored VM differs from the original at backup time", i)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		src, _ := restore.OpenDisk(context.Background(), l.r, d, 0)
		alloc := int64(0)
		for _, e := range src.Allocated() {
			alloc += e.Length
		}
		// Block granularity of the file system: a few blocks of slack.
		if onDisk := st.Blocks * 512; onDisk > alloc+alloc/50+64<<10 {
			t.Fatalf("disk %d: %d bytes allocated on the datastore for %d bytes of data in the point", i, onDisk, alloc)
		}
		t.Logf("disk %d: %d bytes of data in the point, %d bytes allocated on the target datastore", i, alloc, st.Blocks*512)
	}
	if n := len((&hostLab{s: l.s}).moverDisks(t, l.mover)); n != 1 {
		t.Fatalf("the data mover has %d disks after the restore, want its own only", n)
	}
	for _, dir := range []string{hotAddDir(state), ranged.RecordsDir(state)} {
		if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
			t.Fatalf("left in %s: %v", dir, left)
		}
	}
}

func pointData(t *testing.T, l *rangedLab) int64 {
	n := int64(0)
	for _, d := range l.point.Disks {
		src, err := restore.OpenDisk(context.Background(), l.r, d, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range src.Allocated() {
			n += e.Length
		}
	}
	return n
}

// TestRangedRestoreKeepsThinDisksThin restores a two-disk VM through the
// hot-add transport: both disks are attached to the data mover at once,
// only the point's data is sent (the thin disk's holes are not), the
// target extents allocate what the point holds, and the bytes equal the
// original's.
func TestRangedRestoreKeepsThinDisksThin(t *testing.T) {
	l := startRangedLab(t)
	state := filepath.Join(t.TempDir(), "state")
	c := l.connect(t, state, &writeDevices{together: 2})
	nv, err := l.restore(t, c, hypervisor.NewVMOptions{Name: "vm-0000-restored"})
	if err != nil {
		t.Fatal(err)
	}
	l.check(t, nv, state)
	st, data := nv.RestoreStats(), pointData(t, l)
	if st.Written != data || st.Zeroed != 0 || st.Resumed != 0 {
		t.Fatalf("sent %+v for %d bytes of data in the point", st, data)
	}
	t.Logf("sent %d bytes for %d bytes of data on %d bytes of disks; notes: %q", st.Written, data, 2*rangedDisk, nv.Notes())
}

// breakingTarget fails the first write at or past breakAt with EIO, as a
// device does when the data mover loses its path to the disk.
type breakingTarget struct {
	ranged.Target
	breakAt int64
	broke   *bool
}

func (b breakingTarget) WriteAt(p []byte, off int64) (int, error) {
	if off >= b.breakAt && !*b.broke {
		*b.broke = true
		return 0, &os.PathError{Op: "write", Path: "/dev/sdz", Err: syscall.EIO}
	}
	return b.Target.WriteAt(p, off)
}

// TestRangedRestoreResumesAfterABreak breaks the full disk's restore with
// an I/O error after its first piece: within the retry policy the write
// resumes from the journal, sends only the pieces not yet done, and the
// disks end bit-identical.
func TestRangedRestoreResumesAfterABreak(t *testing.T) {
	l := startRangedLab(t)
	state := filepath.Join(t.TempDir(), "state")
	c := l.connect(t, state, &writeDevices{})
	broke := false
	orig := newDeviceTarget
	newDeviceTarget = func(f *os.File) ranged.Target {
		if filepath.Base(f.Name()) == "vm-0000-restored_0-flat.vmdk" {
			return breakingTarget{Target: orig(f), breakAt: ranged.PieceBytes, broke: &broke}
		}
		return orig(f)
	}
	t.Cleanup(func() { newDeviceTarget = orig })
	nv, err := l.restore(t, c, hypervisor.NewVMOptions{Name: "vm-0000-restored", Streams: 1,
		Retries: hypervisor.RetryPolicy{Attempts: 2, Backoff: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if !broke {
		t.Fatal("the restore never broke")
	}
	l.check(t, nv, state)
	st := nv.RestoreStats()
	if data := pointData(t, l); st.Written != data || st.Resumed != 0 {
		t.Fatalf("sent %+v for %d bytes of data: a resumed piece was sent twice", st, data)
	}
}

// TestRangedRestoreResumesWithResume: a break the retries do not cover
// leaves the half-restored VM and its journal (KeepForResume); the same
// restore with Resume takes that VM up again, sends only the pieces not
// done, and the disks end bit-identical.
func TestRangedRestoreResumesWithResume(t *testing.T) {
	l := startRangedLab(t)
	state := filepath.Join(t.TempDir(), "state")
	c := l.connect(t, state, &writeDevices{})
	broke := false
	orig := newDeviceTarget
	newDeviceTarget = func(f *os.File) ranged.Target {
		if filepath.Base(f.Name()) == "vm-0000-restored_0-flat.vmdk" {
			return breakingTarget{Target: orig(f), breakAt: ranged.PieceBytes, broke: &broke}
		}
		return orig(f)
	}
	t.Cleanup(func() { newDeviceTarget = orig })
	o := hypervisor.NewVMOptions{Name: "vm-0000-restored", Streams: 1}
	first, err := l.restore(t, c, o)
	if err == nil || !first.KeepForResume(err) {
		t.Fatalf("the broken restore: %v; kept for resume: %v", err, err != nil && first.KeepForResume(err))
	}
	sent := first.RestoreStats().Written
	o.Resume = true
	nv, err := l.restore(t, c, o)
	if err != nil {
		t.Fatal(err)
	}
	if nv.ref != first.ref {
		t.Fatalf("resumed into %s, not the broken restore's VM %s", nv.ref.Value, first.ref.Value)
	}
	l.check(t, nv, state)
	st, data := nv.RestoreStats(), pointData(t, l)
	if st.Resumed != sent || sent+st.Written != data {
		t.Fatalf("first run sent %d, the resumed run %+v, for %d bytes of data", sent, st, data)
	}
	if _, err := l.restore(t, c, o); err == nil {
		t.Fatal("a finished restore resumed again")
	}
}
