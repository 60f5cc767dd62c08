package replica

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
)

// The standby's definition (standby.json) is the source VM's recorded
// configuration with its networks and disks mapped to the DR site's own:
// each NIC's network through the policy's explicit network map (a network
// the map does not name fails the run before anything is written), each
// disk to its overlay chain in the standby's directory. It is a file, not
// a VM defined on the target host: nothing there can start the standby
// by accident (no domain to autostart or to start by mistake); failover
// creates the VM from it, on a new overlay above the chosen point. The
// overlays themselves are read-only files guarded by QEMU's own locks
// while coffer works on them (lock.go).
const definitionName = "standby.json"

// Marker is the definition's kind: what failover checks before it starts
// anything from a directory.
const Marker = "coffer-replica-standby"

// Definition is the standby's definition.
type Definition struct {
	Marker string `json:"marker"`
	// Autostart is always false: a standby starts only by failover.
	Autostart bool `json:"autostart"`
	// Seq and BackupPoint are the point the disks' paths name (the newest).
	Seq         int                 `json:"seq"`
	BackupPoint string              `json:"backup_point"`
	Config      hypervisor.VMConfig `json:"config"`
}

// ErrUnmappedNetwork reports a source network the policy's map lacks.
var ErrUnmappedNetwork = fmt.Errorf("network not mapped")

// MapNetworks checks that networks maps every network the point's VM is
// attached to, and returns its configuration with the DR site's networks.
func MapNetworks(p *repo.Point, networks map[string]string) (hypervisor.VMConfig, error) {
	var cfg hypervisor.VMConfig
	if len(p.VMConfig) > 0 {
		if err := json.Unmarshal(p.VMConfig, &cfg); err != nil {
			return cfg, fmt.Errorf("the point's VM configuration: %w", err)
		}
	}
	var missing []string
	for i, n := range cfg.NICs {
		to, ok := networks[n.Network]
		if !ok {
			missing = append(missing, n.Network)
			continue
		}
		cfg.NICs[i].Network = to
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return cfg, fmt.Errorf("%w: the VM is attached to %s, which the policy's networks map does not name", ErrUnmappedNetwork, strings.Join(slices.Compact(missing), ", "))
	}
	return cfg, nil
}

// writeDefinition records the definition of point pt (atomically).
func writeDefinition(dir string, cfg hypervisor.VMConfig, pt *Point) error {
	disks := make([]hypervisor.DiskInfo, 0, len(pt.Disks))
	for _, d := range pt.Disks {
		disks = append(disks, hypervisor.DiskInfo{Key: d.Key, Name: d.Name, Size: d.Size, Datastore: dir, Path: d.File, Format: "qcow2"})
	}
	cfg.Disks = disks
	def := Definition{Marker: Marker, Seq: pt.Seq, BackupPoint: pt.BackupPoint, Config: cfg}
	b, err := json.MarshalIndent(def, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, definitionName+".tmp")
	if err := writeSynced(tmp, b); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, definitionName))
}

// LoadDefinition reads a standby's definition; it fails for a directory
// that is not a standby's.
func LoadDefinition(dir string) (*Definition, error) {
	b, err := os.ReadFile(filepath.Join(dir, definitionName))
	if err != nil {
		return nil, err
	}
	var d Definition
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, definitionName), err)
	}
	if d.Marker != Marker {
		return nil, fmt.Errorf("%s is not a coffer standby's definition", filepath.Join(dir, definitionName))
	}
	return &d, nil
}

// ActiveFile is the writable overlay of disk key that a failover onto a
// standby defined on the DR host's hypervisor (a libvirt domain) creates
// above the chosen point: the file the domain's disk names. Until then it
// does not exist, so the domain cannot start by accident. Runs never
// write it: a standby that failed over is not replicated onto.
func ActiveFile(dir, key string) string {
	return filepath.Join(dir, "disk-"+fileKey(key)+"-active.qcow2")
}
