package libvirt_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/connectortest"
	"github.com/coffer-backup/coffer/internal/hypervisor/libvirt/libvirttest"
)

// TestConformance runs the connector contract against the lab's domain
// with an idle guest (so that only the suite changes its disks), written
// through QEMU's own qemu-io on the disk's device, as the guest would.
func TestConformance(t *testing.T) {
	var l *lab
	connectortest.Run(t, func(t *testing.T) connectortest.Harness {
		l = startLabMode(t, "idle", "COFFER IDLE")
		return connectortest.Harness{
			Conn: l.conn, VM: l.ref,
			Write:     l.writeThroughQEMU,
			Leftovers: l.leftovers,
			Caps: connectortest.Capabilities{
				Modes: map[hypervisor.SnapshotMode]hypervisor.SnapshotMode{
					"":                         hypervisor.CrashConsistent,
					hypervisor.CrashConsistent: hypervisor.CrashConsistent,
					hypervisor.Quiesced:        hypervisor.Quiesced,
					hypervisor.Suspend:         hypervisor.Suspend,
				},
				Refused: map[hypervisor.SnapshotMode]error{
					hypervisor.WithMemory: hypervisor.ErrUnsupported,
					hypervisor.AsIs:       hypervisor.ErrUnsupported,
				},
				PointInTime: true, ChangeTracking: true, QuietChanges: true, Release: true,
			},
		}
	})
	t.Run("HoldKeepsDomainPaused", func(t *testing.T) { l.checkHold(t) })
}

// checkHold: a session for storage-level protection keeps the domain
// paused, and frozen when quiesced, until Release (a pull job leaves the
// disk files changing, so the storage snapshot taken meanwhile must find
// them still), and a session closed without Release resumes it too.
func (l *lab) checkHold(t *testing.T) {
	state := func() golibvirt.DomainState {
		st, _, err := l.admin.DomainGetState(l.dom, 0)
		if err != nil {
			t.Fatal(err)
		}
		return golibvirt.DomainState(st)
	}
	for _, release := range []bool{true, false} {
		req := hypervisor.SnapshotRequest{SessionID: fmt.Sprintf("hold-%v", release), Mode: hypervisor.Quiesced,
			Quiesce: hypervisor.QuiesceRequired, Hold: true, Track: true}
		s, err := l.conn.Snapshot(l.ctx, l.ref, req)
		if err != nil {
			t.Fatal(err)
		}
		if st := state(); st != golibvirt.DomainPaused || s.AchievedMode() != hypervisor.Quiesced {
			t.Fatalf("held session: domain state %d, achieved %s; want paused, quiesced", st, s.AchievedMode())
		}
		if release {
			if err := s.Release(l.ctx); err != nil {
				t.Fatal(err)
			}
			if st := state(); st != golibvirt.DomainRunning {
				t.Fatalf("after release: domain state %d", st)
			}
		}
		if _, err := s.Close(l.ctx, false); err != nil {
			t.Fatal(err)
		}
		if st := state(); st != golibvirt.DomainRunning {
			t.Fatalf("after close (released %v): domain state %d", release, st)
		}
		// Thawed: a second freeze would fail on a frozen guest.
		if _, err := l.admin.DomainFsfreeze(l.dom, nil, 0); err != nil {
			t.Fatalf("the guest was left frozen: %v", err)
		}
		if _, err := l.admin.DomainFsthaw(l.dom, nil, 0); err != nil {
			t.Fatal(err)
		}
	}
	l.assertClean()
}

// writeThroughQEMU writes data with the monitor's qemu-io on the disk's
// own device (-d: its block backend, so the guest's permissions apply and
// the dirty bitmaps see the write), from a file the daemon's QEMU reads.
func (l *lab) writeThroughQEMU(_ context.Context, key string, off int64, data []byte) error {
	src := filepath.Join(l.dir, "write.src")
	if err := os.WriteFile(src, data, 0o644); err != nil {
		return err
	}
	dev := map[string]string{"vda": "virtio-disk0", "vdb": "virtio-disk1"}[key]
	dev = "/machine/peripheral/" + dev + "/virtio-backend" // the device that holds the block backend
	cmd := fmt.Sprintf(`qemu-io -d %s "write -s %s %d %d"`, dev, src, off, len(data))
	out, err := l.admin.QEMUDomainMonitorCommand(l.dom, cmd, 1) // 1: HMP
	if err != nil {
		return err
	}
	if strings.TrimSpace(out) != "" { // its statistics go to QEMU's stdout, errors to the monitor
		return fmt.Errorf("qemu-io: %s", out)
	}
	return nil
}

// leftovers lists what coffer left on the domain beyond the conformance
// chain's own checkpoints (libvirttest.Leftovers).
func (l *lab) leftovers(context.Context) ([]string, error) {
	return libvirttest.Leftovers(l.admin, l.dom, l.state, connectortest.Chain)
}
