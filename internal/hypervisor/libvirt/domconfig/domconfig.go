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
	var d Domain
	if err := xml.Unmarshal([]byte(n.DomainXML), &d); err != nil {
		return nil, fmt.Errorf("the recorded domain definition does not read: %w", err)
	}
	return &d, nil
}
