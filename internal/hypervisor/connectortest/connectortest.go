// Package connectortest is the contract every hypervisor connector meets,
// as a test suite: the backup pipeline (internal/backup), the job engine
// (internal/engine) and the service layer rely on what it checks, so a new
// connector that passes it fits under them. Each connector's package runs
// it against its own real platform (a QEMU storage daemon and a TCG guest,
// a libvirtd, a vcsim) through a Harness:
//
//	func TestConformance(t *testing.T) {
//		connectortest.Run(t, func(t *testing.T) connectortest.Harness { ... })
//	}
//
// What a connector cannot do on the harness's VM is declared in
// Capabilities, as data; the subtests that need it are skipped, never
// guessed from the connector's type.
package connectortest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// Chain is the backup chain (SnapshotRequest.Chain) of every session the
// suite opens; a harness's Leftovers may keep this chain's change
// tracking.
const Chain = "conformance"

// Harness is one connector and one VM of its inventory that the suite may
// snapshot and write to.
type Harness struct {
	Conn hypervisor.Connector
	// VM is in Conn's inventory, has at least one disk of 1 MiB or more,
	// and nothing but Write changes its disks while the suite runs.
	VM hypervisor.VMRef
	// Write writes data at byte off of the VM's disk key, as its guest
	// would (through the hypervisor, so change tracking sees it), and
	// returns once a snapshot taken afterwards holds it. The suite writes
	// 64 KiB at offsets that are multiples of 64 KiB.
	Write func(ctx context.Context, key string, off int64, data []byte) error
	// Leftovers lists what the connector created for the VM and left on
	// the hypervisor or in its state directory (block nodes, exports,
	// jobs, VM snapshots, journals), beyond the change tracking of Chain
	// that the next backup needs. The suite calls it after every session
	// is closed and wants nothing.
	Leftovers func(ctx context.Context) ([]string, error)
	Caps      Capabilities
}

// Capabilities declare what the connector does on the harness's VM.
type Capabilities struct {
	// Modes maps every snapshot mode the connector accepts for the VM to
	// the mode it really achieves there (Quiesced achieves
	// CrashConsistent on a VM without a guest agent).
	Modes map[hypervisor.SnapshotMode]hypervisor.SnapshotMode
	// Refused are modes the connector refuses for the VM, each with the
	// error Snapshot wraps (hypervisor.ErrUnsupported).
	Refused map[hypervisor.SnapshotMode]error
	// PointInTime: writes after Snapshot returned do not reach the
	// session's reads (false only for a simulator whose snapshots hold
	// no data, vcsim's).
	PointInTime bool
	// ChangeTracking: a token from Close(ok) (or NewToken) given back as
	// SnapshotRequest.Since yields the ranges changed since.
	ChangeTracking bool
	// QuietChanges: the change set of a disk nobody wrote to is empty
	// (tracking has no false positives when the disk is idle).
	QuietChanges bool
	// Release: the VM can be snapshotted for storage-level protection
	// (SnapshotRequest.Hold) and the session released early
	// (Session.Release), as the engine's group mode does.
	Release bool
}

// Run runs the conformance suite; newHarness is called once, and its VM
// is shared by the subtests, which run one after another.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	h := newHarness(t)
	c := &checker{h: h}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	c.ctx = ctx
	c.vm, c.disk = c.describe(t)
	subtests := []struct {
		name string
		run  func(*testing.T)
	}{
		{"Inventory", c.inventory},
		{"UnknownVM", c.unknownVM},
		{"Modes", c.modes},
		{"Read", c.read},
		{"PointInTime", c.pointInTime},
		{"ChangeTracking", c.changeTracking},
		{"Differential", c.differential},
		{"Release", c.release},
		{"UnusableToken", c.unusableToken},
		{"CancelEndsRead", c.cancelEndsRead},
		{"CancelledSnapshot", c.cancelledSnapshot},
		{"CleanupFindsNothing", c.cleanupFindsNothing},
	}
	for _, st := range subtests {
		t.Run(st.name, func(t *testing.T) {
			// Registered first, so it runs after the test's own cleanups
			// have closed its readers and sessions.
			t.Cleanup(func() {
				if !t.Skipped() && !t.Failed() {
					c.noLeftovers(t)
				}
			})
			st.run(t)
		})
	}
}

type checker struct {
	h    Harness
	ctx  context.Context
	vm   hypervisor.VM
	disk hypervisor.DiskInfo // the disk the suite writes to
	seq  int
}

// describe finds the harness's VM in the inventory.
func (c *checker) describe(t *testing.T) (hypervisor.VM, hypervisor.DiskInfo) {
	t.Helper()
	vms, err := c.h.Conn.Inventory(c.ctx)
	if err != nil {
		t.Fatalf("inventory: %v", err)
	}
	for _, vm := range vms {
		if (c.h.VM.ID != "" && vm.ID == c.h.VM.ID) || (c.h.VM.ID == "" && vm.Name == c.h.VM.Name) {
			if len(vm.Disks) == 0 || vm.Disks[0].Size < 1<<20 {
				t.Fatalf("VM %s: the suite needs a disk of 1 MiB or more, has %+v", vm.Name, vm.Disks)
			}
			return vm, vm.Disks[0]
		}
	}
	t.Fatalf("VM %+v is not in the inventory of %d VMs", c.h.VM, len(vms))
	return hypervisor.VM{}, hypervisor.DiskInfo{}
}

// request is a snapshot request of the suite's chain with a fresh session ID.
func (c *checker) request(mode hypervisor.SnapshotMode) hypervisor.SnapshotRequest {
	c.seq++
	return hypervisor.SnapshotRequest{SessionID: fmt.Sprintf("conformance-%d-%d", time.Now().UnixNano()%1e6, c.seq),
		Chain: Chain, Mode: mode, Quiesce: hypervisor.QuiesceFallback}
}

// snapshot opens a session; a test that ends without closing it closes
// it with ok=false, as BackupVM does after a failure.
func (c *checker) snapshot(t *testing.T, req hypervisor.SnapshotRequest) hypervisor.Session {
	t.Helper()
	s, err := c.h.Conn.Snapshot(c.ctx, c.vm.VMRef, req)
	if err != nil {
		t.Fatalf("snapshot (%s): %v", req.Mode, err)
	}
	t.Cleanup(func() {
		if _, err := s.Close(context.Background(), false); err != nil {
			t.Errorf("closing the session at the end of the test: %v", err)
		}
	})
	return s
}

// closeOK closes a session as a committed backup does and returns the
// change tokens the next backup's Since would hold: those Close returns,
// else the disks' NewToken (BackupVM records NewToken in the point first
// and Close's tokens over it).
func (c *checker) closeOK(t *testing.T, s hypervisor.Session) map[string]string {
	t.Helper()
	tokens := map[string]string{}
	for _, d := range s.Disks() {
		if d.Kind == hypervisor.KindDisk && d.NewToken != "" {
			tokens[d.Key] = d.NewToken
		}
	}
	got, err := s.Close(c.ctx, true)
	if err != nil {
		t.Fatalf("close(ok): %v", err)
	}
	for k, v := range got {
		tokens[k] = v
	}
	again, err := s.Close(c.ctx, true)
	if err != nil {
		t.Fatalf("a second close(ok) (Close is idempotent): %v", err)
	}
	for k, v := range again {
		if got[k] != v {
			t.Fatalf("a second close(ok) returned token %q for %s, the first %q", v, k, got[k])
		}
	}
	return tokens
}

func (c *checker) noLeftovers(t *testing.T) {
	t.Helper()
	left, err := c.h.Leftovers(c.ctx)
	if err != nil {
		t.Fatalf("listing leftovers: %v", err)
	}
	if len(left) > 0 {
		t.Fatalf("left behind after every session was closed: %q", left)
	}
}

// pattern is 64 KiB of bytes no disk holds by chance, different per seed.
func pattern(seed int) []byte {
	b := make([]byte, 64<<10)
	x := uint64(seed)*0x9e3779b97f4a7c15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

// offset is the n-th 64 KiB-aligned place of the suite's disk (n < 8).
func (c *checker) offset(n int) int64 {
	step := c.disk.Size / 8 &^ (64<<10 - 1)
	return int64(n) * step
}

func (c *checker) write(t *testing.T, off int64, data []byte) {
	t.Helper()
	if err := c.h.Write(c.ctx, c.disk.Key, off, data); err != nil {
		t.Fatalf("harness write at %d: %v", off, err)
	}
}

// open opens the suite's disk of s.
func (c *checker) open(t *testing.T, ctx context.Context, s hypervisor.Session) hypervisor.DiskReader {
	t.Helper()
	r, err := s.OpenDisk(ctx, c.disk.Key)
	if err != nil {
		t.Fatalf("open disk %s: %v", c.disk.Key, err)
	}
	t.Cleanup(func() { _ = r.Close() }) // only read
	return r
}

func (c *checker) sessionDisk(t *testing.T, s hypervisor.Session) hypervisor.DiskSnapshot {
	t.Helper()
	for _, d := range s.Disks() {
		if d.Key == c.disk.Key {
			return d
		}
	}
	t.Fatalf("session has no disk %s: %+v", c.disk.Key, s.Disks())
	return hypervisor.DiskSnapshot{}
}

// checkExtents checks that ext is sorted, non-overlapping and inside size.
func checkExtents(t *testing.T, what string, ext []hypervisor.Extent, size int64) {
	t.Helper()
	var end int64
	for i, e := range ext {
		if e.Length <= 0 || e.Offset < end || e.Offset+e.Length > size {
			t.Fatalf("%s: extent %d %+v is empty, overlaps or is out of order, or ends past %d: %+v", what, i, e, size, ext)
		}
		end = e.Offset + e.Length
	}
}

// covers reports whether ext holds all of [off, off+n).
func covers(ext []hypervisor.Extent, off, n int64) bool {
	for _, e := range ext {
		if e.Offset <= off && off < e.Offset+e.Length {
			if e.Offset+e.Length >= off+n {
				return true
			}
			n -= e.Offset + e.Length - off
			off = e.Offset + e.Length
		}
	}
	return n <= 0
}

// readRange reads n bytes at off and fails the test on an error.
func readRange(t *testing.T, r hypervisor.DiskReader, off int64, n int) []byte {
	t.Helper()
	buf := make([]byte, n)
	if _, err := r.ReadAt(buf, off); err != nil {
		t.Fatalf("read %d bytes at %d: %v", n, off, err)
	}
	return buf
}

func isErr(err, target error) bool { return err != nil && errors.Is(err, target) }
