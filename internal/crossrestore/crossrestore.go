// Package crossrestore maps a backup point's recorded VM onto another
// platform's virtual hardware: a vSphere VM as a libvirt domain, a QEMU
// or libvirt VM as a vSphere VM. It reads the point's configuration into
// a platform-neutral machine (controllers, disks, adapters, firmware,
// CPUs, memory, guest family), writes that machine in the target's
// recorded form (hypervisor.VMConfig with the target's Native: a domain
// definition, a vSphere VM's placement, a QEMU command line), so the
// target's own connector creates it as it creates any restored VM, and
// reports, before anything is created, what it mapped, what it could not
// map and what the guest will need on its new platform.
package crossrestore

import (
	"errors"
	"fmt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// Options adjust a mapping.
type Options struct {
	// Network is the target's network every adapter joins; "" keeps the
	// recorded network names (a vSphere adapter whose network the target
	// lacks is left out, and the report says so).
	Network string
	// Emulated: the libvirt host runs guests under TCG (no KVM); the
	// new domain's type is then "qemu" instead of "kvm".
	Emulated bool
}

// Plan is a point's VM mapped onto a target platform.
type Plan struct {
	// Config is the VM as the target's connector restores it.
	Config hypervisor.VMConfig
	// DiskKeys maps each disk key of the point to the disk key of
	// Config the connector writes it to.
	DiskKeys map[string]string
	Report   Report
}

// Report is what a restore onto another platform maps, and what it
// cannot: it is shown before the restore starts.
type Report struct {
	From string `json:"from"` // the point's platform
	To   string `json:"to"`   // the target's platform
	// Mapped are the items carried over, each from the source's device
	// to the target's.
	Mapped []Item `json:"mapped"`
	// Unmapped are items the target cannot reproduce: left out, or put
	// on a substitute the guest may not drive.
	Unmapped []Item `json:"unmapped"`
	// Needs are what the guest must have to run on the target.
	Needs []string `json:"needs"`
}

// Item is one mapped (or unmapped) piece of the VM.
type Item struct {
	Kind string `json:"kind"` // firmware, cpus, memory, guest, disk, nic, boot, memory-state
	Name string `json:"name"` // the source's name for it (disk key, adapter key)
	From string `json:"from"`
	To   string `json:"to,omitempty"` // "" when it is left out
	Note string `json:"note,omitempty"`
}

// ErrSamePlatform: the point is restored by its own platform's connector,
// which needs no mapping.
var ErrSamePlatform = errors.New("the point's VM is of the target's own platform")

// Map maps cfg, a point's recorded VM, onto the platform target
// ("libvirt", "vsphere", or "qemu": a VM in a directory of this host).
func Map(cfg hypervisor.VMConfig, target string, o Options) (*Plan, error) {
	if cfg.Kind == target {
		return nil, ErrSamePlatform
	}
	m, err := read(cfg)
	if err != nil {
		return nil, err
	}
	r := &Report{From: cfg.Kind, To: target, Mapped: []Item{}, Unmapped: []Item{}, Needs: []string{}}
	r.Unmapped = append(r.Unmapped, m.unread...)
	var p *Plan
	switch target {
	case "libvirt":
		p, err = toLibvirt(m, o, r)
	case "vsphere":
		p, err = toVSphere(m, o, r)
	case "qemu":
		p, err = toQEMU(m, o, r)
	default:
		return nil, fmt.Errorf("a %s point cannot be restored onto a %s connection: coffer maps VMs onto libvirt, vSphere and QEMU: %w",
			cfg.Kind, target, hypervisor.ErrUnsupported)
	}
	if err != nil {
		return nil, err
	}
	p.Report = *r
	return p, nil
}

// read is cfg as a platform-neutral machine.
func read(cfg hypervisor.VMConfig) (*machine, error) {
	switch cfg.Kind {
	case "vsphere":
		return fromVSphere(cfg)
	case "libvirt":
		return fromLibvirt(cfg)
	case "qemu":
		return fromQEMU(cfg)
	}
	return nil, fmt.Errorf("a %s point records no VM coffer can map onto another platform: %w", cfg.Kind, hypervisor.ErrUnsupported)
}
