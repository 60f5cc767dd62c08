package vsphere

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/connectortest"
)

// TestConformance runs the connector contract on vcsim, with the CBT shim
// standing in for ESXi's changed block tracking. vcsim's snapshots hold
// no data of their own (reads go to the live flat file), so the
// point-in-time check is declared away.
func TestConformance(t *testing.T) {
	connectortest.Run(t, func(t *testing.T) connectortest.Harness {
		s := startSim(t, simOptions{Hosts: 1, Datastores: 1, VMs: 1})
		sh := newCBTShim(t, s)
		c := sh.connect(t, func(c *Config) { c.ReadFrom = ReadFromVCenter })
		ref := s.vms[0]
		s.setTools(ref, true)
		return connectortest.Harness{
			Conn: c, VM: hypervisor.VMRef{ID: ref.Value, Name: "vm-0000"},
			Write: func(_ context.Context, key string, off int64, data []byte) error {
				sh.write(t, ref, 0, off, data) // the suite writes the first disk
				return nil
			},
			Leftovers: func(context.Context) ([]string, error) {
				var left []string
				for name := range s.snapshots(ref) {
					left = append(left, "snapshot "+name)
				}
				j, err := filepath.Glob(filepath.Join(journalDir(c.cfg.StateDir), "*.json"))
				return append(left, j...), err
			},
			Caps: connectortest.Capabilities{
				Modes: map[hypervisor.SnapshotMode]hypervisor.SnapshotMode{
					"":                         hypervisor.CrashConsistent,
					hypervisor.CrashConsistent: hypervisor.CrashConsistent,
					hypervisor.Quiesced:        hypervisor.Quiesced,
					hypervisor.WithMemory:      hypervisor.WithMemory,
					hypervisor.Suspend:         hypervisor.Suspend,
					hypervisor.AsIs:            hypervisor.AsIs,
				},
				ChangeTracking: true, QuietChanges: true, Release: true,
			},
		}
	})
}
