package qemu_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/guestvm"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/connectortest"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu/qemutest"
	"github.com/coffer-backup/coffer/internal/nbd"
	"github.com/coffer-backup/coffer/internal/qmp"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestConformance runs the connector contract against both kinds of
// QEMU it protects: a qemu-storage-daemon (no guest CPU: no guest to
// quiesce or pause, no memory to save, and those modes fall back or are
// refused, as declared), written through its NBD export; and a TCG guest
// idling with a guest agent (every mode achieved), written through
// qemu-io on its disk's own device.
func TestConformance(t *testing.T) {
	t.Run("storage-daemon", func(t *testing.T) { connectortest.Run(t, daemonHarness) })
	t.Run("guest", func(t *testing.T) { connectortest.Run(t, guestHarness) })
}

func daemonHarness(t *testing.T) connectortest.Harness {
	ctx := context.Background()
	dir := t.TempDir()
	q := startQSD(t, dir, "conf", 32<<20, true)
	state := filepath.Join(dir, "state")
	conn := newConformanceConnector(t, q.qmp, state)
	w, err := nbd.Dial(ctx, "unix", q.nbd, nbd.ClientOptions{Export: "vda"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	adm := dialAdmin(t, q.admin)
	return connectortest.Harness{
		Conn: conn, VM: onlyVM(t, conn),
		Write: func(_ context.Context, _ string, off int64, data []byte) error {
			_, err := w.WriteAt(data, off) // acknowledged: in the image and the dirty bitmaps
			return err
		},
		Leftovers: func(ctx context.Context) ([]string, error) { return qemuLeftovers(ctx, t, adm, state, "vda") },
		Caps: connectortest.Capabilities{
			Modes: map[hypervisor.SnapshotMode]hypervisor.SnapshotMode{
				"":                         hypervisor.CrashConsistent,
				hypervisor.CrashConsistent: hypervisor.CrashConsistent,
				hypervisor.Quiesced:        hypervisor.CrashConsistent,
				hypervisor.Suspend:         hypervisor.CrashConsistent,
				hypervisor.AsIs:            hypervisor.AsIs,
			},
			Refused:     map[hypervisor.SnapshotMode]error{hypervisor.WithMemory: hypervisor.ErrUnsupported},
			PointInTime: true, ChangeTracking: true, QuietChanges: true,
		},
	}
}

func guestHarness(t *testing.T) connectortest.Harness {
	testutil.RequireBinary(t, "qemu-system-x86_64")
	qemuImg := testutil.RequireBinary(t, "qemu-img")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	img, err := guestvm.Build(ctx)
	if err != nil {
		if err == guestvm.ErrNoAssets && !testutil.Strict() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	dir := t.TempDir()
	disk := filepath.Join(dir, "vda.qcow2")
	if out, err := exec.Command(qemuImg, "create", "-q", "-f", "qcow2", disk, "16M").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	vm, err := guestvm.Start(ctx, img, guestvm.Options{Name: "conf-1", UUID: "0c6d1f4e-3a2b-4c5d-8e9f-a0b1c2d3e4f5",
		Dir: filepath.Join(dir, "vm"), Mode: "idle", GuestAgent: true,
		Disks: []guestvm.Disk{{ID: "vda", Path: disk, Format: "qcow2"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	if _, err := vm.WaitConsole(ctx, "COFFER IDLE"); err != nil {
		t.Fatalf("%v\n%s", err, vm.Console())
	}
	state := filepath.Join(dir, "state")
	conn := newConformanceConnector(t, vm.QMPPath, state)
	adm := dialAdmin(t, vm.TestQMP)
	return connectortest.Harness{
		Conn: conn, VM: onlyVM(t, conn),
		Write: func(ctx context.Context, key string, off int64, data []byte) error {
			return qemuIOWrite(ctx, adm, filepath.Join(dir, "write.src"), key, off, data)
		},
		Leftovers: func(ctx context.Context) ([]string, error) {
			left, err := qemuLeftovers(ctx, t, adm, state, "")
			var st struct {
				Status string `json:"status"`
			}
			if err == nil {
				err = adm.Execute(ctx, "query-status", nil, &st)
			}
			if st.Status != "running" {
				left = append(left, "VM "+st.Status)
			}
			return left, err
		},
		Caps: connectortest.Capabilities{
			Modes: map[hypervisor.SnapshotMode]hypervisor.SnapshotMode{
				"":                         hypervisor.CrashConsistent,
				hypervisor.CrashConsistent: hypervisor.CrashConsistent,
				hypervisor.Quiesced:        hypervisor.Quiesced,
				hypervisor.Suspend:         hypervisor.Suspend,
				hypervisor.WithMemory:      hypervisor.WithMemory,
				hypervisor.AsIs:            hypervisor.AsIs,
			},
			PointInTime: true, ChangeTracking: true, QuietChanges: true, Release: true,
		},
	}
}

func newConformanceConnector(t *testing.T, sock, state string) *qemu.Connector {
	conn, err := qemu.New(qemu.Config{Sockets: []string{sock}, StateDir: state, Connections: 2})
	if err != nil {
		t.Fatal(err)
	}
	return conn
}

func onlyVM(t *testing.T, conn *qemu.Connector) hypervisor.VMRef {
	vms, err := conn.Inventory(context.Background())
	if err != nil || len(vms) != 1 {
		t.Fatalf("inventory: %+v %v", vms, err)
	}
	return vms[0].VMRef
}

func dialAdmin(t *testing.T, sock string) *qmp.Client {
	adm, err := qmp.Dial(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { adm.Close() })
	return adm
}

// qemuIOWrite writes data with the monitor's qemu-io on the disk's own
// device (so the guest's permissions apply and the dirty bitmaps see the
// write), from a file.
func qemuIOWrite(ctx context.Context, adm *qmp.Client, src, key string, off int64, data []byte) error {
	if err := os.WriteFile(src, data, 0o600); err != nil {
		return err
	}
	var out string
	cmd := fmt.Sprintf(`qemu-io -d /machine/peripheral/%s/virtio-backend "write -s %s %d %d"`, key, src, off, len(data))
	if err := adm.Execute(ctx, "human-monitor-command", map[string]any{"command-line": cmd}, &out); err != nil {
		return err
	}
	if strings.TrimSpace(out) != "" { // its statistics go to QEMU's stdout, errors to the monitor
		return fmt.Errorf("qemu-io: %s", out)
	}
	return nil
}

// qemuLeftovers lists what coffer left in a QEMU beyond the conformance
// chain's tracking bitmaps (qemutest.Leftovers).
func qemuLeftovers(ctx context.Context, _ *testing.T, adm *qmp.Client, state, keep string) ([]string, error) {
	return qemutest.Leftovers(ctx, adm, state, connectortest.Chain, keep)
}
