// Package domconfig is the part of a libvirt point's recorded domain
// definition (libvirt.NativeConfig's domain_xml) that its readers map:
// boot verification starts the point's disks under QEMU as libvirt
// presented them, and a cross-platform restore maps the hardware onto
// another hypervisor. It is its own package, free of go-libvirt, so that
// readers of points need not import the connector (as vsphere/vmconfig).
package domconfig

import (
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNoDefinition is returned for a point that records no domain XML.
var ErrNoDefinition = errors.New("the point records no libvirt domain definition")

// Domain is the recorded definition's machine, firmware and devices.
type Domain struct {
	Type     string `xml:"type,attr"` // kvm, qemu
	Metadata struct {
		Libosinfo struct {
			OS struct {
				ID string `xml:"id,attr"`
			} `xml:"os"`
		} `xml:"libosinfo"`
	} `xml:"metadata"`
	OS      OS      `xml:"os"`
	Devices Devices `xml:"devices"`
}

// OS is how the domain boots.
type OS struct {
	Firmware string `xml:"firmware,attr"` // efi, bios, ""
	Type     struct {
		Arch    string `xml:"arch,attr"`
		Machine string `xml:"machine,attr"`
	} `xml:"type"`
	Loader struct {
		Type string `xml:"type,attr"` // pflash, rom
		Path string `xml:",chardata"`
	} `xml:"loader"`
	Kernel  string `xml:"kernel"`
	Initrd  string `xml:"initrd"`
	Cmdline string `xml:"cmdline"`
	Boot    []struct {
		Dev string `xml:"dev,attr"`
	} `xml:"boot"`
}

// Devices are the domain's disks, controllers, NICs and channels.
type Devices struct {
	Disks       []Disk `xml:"disk"`
	Controllers []struct {
		Type  string `xml:"type,attr"`
		Index int    `xml:"index,attr"`
		Model string `xml:"model,attr"`
	} `xml:"controller"`
	Interfaces []struct {
		Model struct {
			Type string `xml:"type,attr"`
		} `xml:"model"`
		MAC struct {
			Address string `xml:"address,attr"`
		} `xml:"mac"`
		Address struct {
			Type     string `xml:"type,attr"`
			Bus      string `xml:"bus,attr"`
			Slot     string `xml:"slot,attr"`
			Function string `xml:"function,attr"`
		} `xml:"address"`
	} `xml:"interface"`
	Channels []struct {
		Target struct {
			Type string `xml:"type,attr"`
			Name string `xml:"name,attr"`
		} `xml:"target"`
	} `xml:"channel"`
}

// Disk is where libvirt attached one disk.
type Disk struct {
	Device string `xml:"device,attr"`
	Target struct {
		Dev string `xml:"dev,attr"`
		Bus string `xml:"bus,attr"`
	} `xml:"target"`
	Boot *struct {
		Order int `xml:"order,attr"`
	} `xml:"boot"`
	// A drive address (controller, bus, unit) for IDE, SATA and SCSI
	// disks; PCI addresses (virtio) are hex and not read.
	Address struct {
		Type       string `xml:"type,attr"`
		Controller string `xml:"controller,attr"`
		Bus        string `xml:"bus,attr"`
		Unit       string `xml:"unit,attr"`
	} `xml:"address"`
}

// Read parses the domain definition a point records (its
// hypervisor.VMConfig.Native).
func Read(native json.RawMessage) (*Domain, error) {
	var n struct {
		DomainXML string `json:"domain_xml"`
	}
	if err := json.Unmarshal(native, &n); err != nil || n.DomainXML == "" {
		return nil, ErrNoDefinition
	}
	return ReadXML(n.DomainXML)
}

// ReadXML parses a recorded domain definition.
func ReadXML(doc string) (*Domain, error) {
	var d Domain
	if err := xml.Unmarshal([]byte(doc), &d); err != nil {
		return nil, fmt.Errorf("the recorded domain definition does not read: %w", err)
	}
	return &d, nil
}

// isolatedNICs are QEMU's devices for libvirt's interface models.
var isolatedNICs = map[string]string{"": "virtio-net-pci", "virtio": "virtio-net-pci", "e1000": "e1000", "e1000e": "e1000e",
	"rtl8139": "rtl8139", "vmxnet3": "vmxnet3"}

// IsolatedNICs are the QEMU arguments of a test failover's copy's
// network: each interface becomes a NIC of the same model and MAC
// address, in the slot it had (nicSlots), on a user-mode network of its
// own with restrict=on, which reaches nothing. The first carries
// forwards (hypervisor.HostForwards): the probes reach the guest
// through it.
func (d *Domain) IsolatedNICs(forwards string) ([]string, error) {
	slots, err := d.nicSlots()
	if err != nil {
		return nil, err
	}
	var args []string
	for i, nic := range d.Devices.Interfaces {
		dev, ok := isolatedNICs[nic.Model.Type]
		if !ok {
			return nil, fmt.Errorf("libvirt: interface model %q: a test copy cannot emulate it on its isolated network", nic.Model.Type)
		}
		netdev := fmt.Sprintf("user,id=coffer-iso%d,restrict=on", i)
		if i == 0 {
			netdev += forwards
		}
		device := fmt.Sprintf("%s,netdev=coffer-iso%d", dev, i)
		if nic.MAC.Address != "" {
			device += ",mac=" + nic.MAC.Address
		}
		args = append(args, "-netdev", netdev, "-device", device+slots[i])
	}
	return args, nil
}

// nicSlots are the PCI addresses of the domain's interfaces, as QEMU
// device options (",bus=pci.0,addr=0x3.0"), in order: a test copy's NIC
// takes the slot its interface had, which the copy's definition leaves
// free (libvirt gives every other device its address explicitly, and a
// device of QEMU's own placed anywhere could take one of them), and the
// guest finds it where it was. A domain libvirt defined records every
// address; an interface without one is refused.
func (d *Domain) nicSlots() ([]string, error) {
	var out []string
	for i, nic := range d.Devices.Interfaces {
		a := nic.Address
		if a.Function == "" {
			a.Function = "0x0"
		}
		bus, errB := strconv.ParseUint(strings.TrimPrefix(a.Bus, "0x"), 16, 8)
		slot, errS := strconv.ParseUint(strings.TrimPrefix(a.Slot, "0x"), 16, 8)
		fn, errF := strconv.ParseUint(strings.TrimPrefix(a.Function, "0x"), 16, 8)
		if a.Type != "pci" || errB != nil || errS != nil || errF != nil {
			return nil, fmt.Errorf("libvirt: the domain's interface %d has no PCI address (%+v): a test copy puts its NIC there", i+1, a)
		}
		name := fmt.Sprintf("pci.%d", bus)
		if bus == 0 && strings.Contains(d.OS.Type.Machine, "q35") {
			name = "pcie.0"
		}
		out = append(out, fmt.Sprintf(",bus=%s,addr=0x%x.%x", name, slot, fn))
	}
	return out, nil
}
