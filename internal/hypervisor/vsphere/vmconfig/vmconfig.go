// Package vmconfig is the part of a vSphere VM's configuration a backup
// point records (hypervisor.VMConfig.Native): what a restore recreates,
// and what boot verification needs to start the point's disks under QEMU
// the way VMware presents them to the guest. It is its own package, free
// of govmomi, so that readers of points need not import the connector.
package vmconfig

import (
	"encoding/json"
	"fmt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// Native is what a point records of a vSphere VM beyond
// hypervisor.VMConfig's common fields.
type Native struct {
	GuestID  string `json:"guestId,omitempty"`
	Version  string `json:"version,omitempty"`
	BIOSUUID string `json:"biosUuid,omitempty"`
	// Disks say where each disk sits: its controller and unit. Points
	// taken before coffer recorded them have none.
	Disks []Disk `json:"disks,omitempty"`
	// BootDisk is the disk key the VM's boot order starts with ("" when
	// the VM leaves the order to its firmware).
	BootDisk string `json:"bootDisk,omitempty"`
}

// Disk is one disk's place on the VM's virtual hardware.
type Disk struct {
	Key string `json:"key"`
	// Controller is one of the Controller* kinds, or the device type of
	// a controller coffer does not know.
	Controller string `json:"controller"`
	Bus        int32  `json:"bus"`  // the controller's bus number
	Unit       int32  `json:"unit"` // the disk's unit number on it
}

// The disk controllers of vSphere's virtual hardware.
const (
	PVSCSI      = "pvscsi"       // VMware Paravirtual SCSI
	LSILogic    = "lsilogic"     // LSI Logic Parallel (53C1030)
	LSILogicSAS = "lsilogic-sas" // LSI Logic SAS (SAS1068)
	BusLogic    = "buslogic"     // BusLogic Parallel
	SATA        = "sata"         // AHCI
	IDE         = "ide"          // the chipset's PIIX4 IDE
	NVMe        = "nvme"
)

// Parse reads the vSphere part of a recorded configuration.
func Parse(cfg hypervisor.VMConfig) (Native, error) {
	var n Native
	if cfg.Kind != "vsphere" {
		return n, fmt.Errorf("vsphere: a %q VM configuration is not a vSphere one: %w", cfg.Kind, hypervisor.ErrUnsupported)
	}
	if len(cfg.Native) == 0 {
		return n, nil
	}
	if err := json.Unmarshal(cfg.Native, &n); err != nil {
		return n, fmt.Errorf("vsphere: the recorded configuration of %s does not read: %w", cfg.Name, err)
	}
	return n, nil
}
