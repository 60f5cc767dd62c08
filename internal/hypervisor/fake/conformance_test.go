package fake

import (
	"context"
	"fmt"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/connectortest"
)

// TestConformance runs the connector contract against a VM whose guest
// agent answers and one whose agent does not (every fourth VM's).
func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name    string
		vm      int
		quiesce hypervisor.SnapshotMode
	}{{"agent", 0, hypervisor.Quiesced}, {"no-agent", 3, hypervisor.CrashConsistent}} {
		t.Run(tc.name, func(t *testing.T) {
			connectortest.Run(t, func(t *testing.T) connectortest.Harness {
				h := harness(t, tc.vm)
				h.Caps.Modes[hypervisor.Quiesced] = tc.quiesce
				return h
			})
		})
	}
}

func harness(t *testing.T, i int) connectortest.Harness {
	c := New(Options{Seed: 7, VMs: 4, DiskSize: 4 << 20})
	vms, err := c.Inventory(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	vm := vms[i]
	return connectortest.Harness{
		Conn: c, VM: vm.VMRef,
		Write: func(_ context.Context, key string, off int64, data []byte) error {
			return c.WriteAt(vm.Name, key, off, data)
		},
		Leftovers: func(context.Context) ([]string, error) {
			var left []string
			for _, o := range c.Objects(vm.Name) {
				left = append(left, "object "+o)
			}
			if n := c.Counters().OpenSessions; n > 0 {
				left = append(left, fmt.Sprintf("%d open sessions", n))
			}
			return left, nil
		},
		Caps: connectortest.Capabilities{
			Modes: map[hypervisor.SnapshotMode]hypervisor.SnapshotMode{
				"":                         hypervisor.CrashConsistent,
				hypervisor.CrashConsistent: hypervisor.CrashConsistent,
				hypervisor.Suspend:         hypervisor.Suspend,
				hypervisor.AsIs:            hypervisor.AsIs,
			},
			Refused:     map[hypervisor.SnapshotMode]error{hypervisor.WithMemory: hypervisor.ErrUnsupported},
			PointInTime: true, ChangeTracking: true, QuietChanges: true,
		},
	}
}
