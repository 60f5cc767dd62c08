package crossrestore

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"strings"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/libvirt"
)

// libvirtBus is how a neutral bus is attached in a libvirt domain: the
// disk's target bus and, for SCSI, the controller model. QEMU emulates
// VMware's Paravirtual SCSI and LSI Logic SAS controllers and VMXNET3,
// so a vSphere guest keeps the drivers it boots with.
var libvirtBus = map[string]struct{ bus, scsiModel string }{
	busVirtioBlk: {"virtio", ""}, busVirtioSCSI: {"scsi", "virtio-scsi"}, busPVSCSI: {"scsi", "vmpvscsi"},
	busLSISAS: {"scsi", "lsisas1068"}, busLSI895: {"scsi", "lsilogic"}, busSATA: {"sata", ""}, busIDE: {"ide", ""},
}

// libvirtSubstitute is where a disk goes whose controller QEMU does not
// emulate: AHCI, which Windows and Linux distributions drive with
// drivers of their own.
const libvirtSubstitute = busSATA

// libvirtModels are neutral adapter models as libvirt's.
var libvirtModels = map[string]string{nicVirtio: "virtio", nicVmxnet3: "vmxnet3", nicE1000: "e1000", nicE1000e: "e1000e",
	nicPCNet: "pcnet", nicRTL8139: "rtl8139"}

// domainDoc is the libvirt domain definition a mapping writes.
type domainDoc struct {
	XMLName xml.Name `xml:"domain"`
	Type    string   `xml:"type,attr"`
	Name    string   `xml:"name"`
	Memory  struct {
		Unit  string `xml:"unit,attr"`
		Value int64  `xml:",chardata"`
	} `xml:"memory"`
	VCPU int `xml:"vcpu"`
	OS   struct {
		Firmware string `xml:"firmware,attr,omitempty"`
		Type     struct {
			Arch    string `xml:"arch,attr"`
			Machine string `xml:"machine,attr"`
			Value   string `xml:",chardata"`
		} `xml:"type"`
	} `xml:"os"`
	Features struct {
		ACPI struct{} `xml:"acpi"`
		APIC struct{} `xml:"apic"`
	} `xml:"features"`
	Devices struct {
		Controllers []ctrlDoc  `xml:"controller"`
		Disks       []diskDoc  `xml:"disk"`
		Interfaces  []ifaceDoc `xml:"interface"`
		Serial      struct {
			Type   string `xml:"type,attr"`
			Target struct {
				Port int `xml:"port,attr"`
			} `xml:"target"`
		} `xml:"serial"`
		Graphics struct {
			Type   string `xml:"type,attr"`
			Listen string `xml:"listen,attr"`
		} `xml:"graphics"`
		Video struct {
			Model struct {
				Type string `xml:"type,attr"`
			} `xml:"model"`
		} `xml:"video"`
	} `xml:"devices"`
}

type ctrlDoc struct {
	Type  string `xml:"type,attr"`
	Index int    `xml:"index,attr"`
	Model string `xml:"model,attr"`
}

type diskDoc struct {
	Type   string `xml:"type,attr"`
	Device string `xml:"device,attr"`
	Driver struct {
		Name string `xml:"name,attr"`
		Type string `xml:"type,attr"`
	} `xml:"driver"`
	// Source is set by the libvirt connector when it creates the domain.
	Source struct {
		File string `xml:"file,attr"`
	} `xml:"source"`
	Target struct {
		Dev string `xml:"dev,attr"`
		Bus string `xml:"bus,attr"`
	} `xml:"target"`
	Boot *struct {
		Order int `xml:"order,attr"`
	} `xml:"boot,omitempty"`
	Address *struct {
		Type       string `xml:"type,attr"`
		Controller int    `xml:"controller,attr"`
		Bus        int    `xml:"bus,attr"`
		Target     int    `xml:"target,attr"`
		Unit       int    `xml:"unit,attr"`
	} `xml:"address,omitempty"`
}

type ifaceDoc struct {
	Type   string `xml:"type,attr"`
	Source struct {
		Network string `xml:"network,attr"`
	} `xml:"source"`
	Model struct {
		Type string `xml:"type,attr"`
	} `xml:"model"`
}

// toLibvirt writes m as a new libvirt domain's definition.
func toLibvirt(m *machine, o Options, r *Report) (*Plan, error) {
	var d domainDoc
	d.Type, d.Name = "kvm", m.name
	if o.Emulated {
		d.Type = "qemu"
	}
	d.Memory.Unit, d.Memory.Value, d.VCPU = "MiB", max(m.memoryMiB, 16), max(m.cpus, 1)
	d.OS.Type.Arch, d.OS.Type.Machine, d.OS.Type.Value = "x86_64", "pc", "hvm"
	r.Mapped = append(r.Mapped, Item{Kind: "cpus", Name: "cpus", From: fmt.Sprint(m.cpus), To: fmt.Sprint(d.VCPU)},
		Item{Kind: "memory", Name: "memory", From: fmt.Sprintf("%d MiB", m.memoryMiB), To: fmt.Sprintf("%d MiB", d.Memory.Value)})
	if m.firmware == "efi" {
		// libvirt picks the OVMF build from the host's firmware
		// descriptors; q35 is the machine they all support.
		d.OS.Firmware, d.OS.Type.Machine = "efi", "q35"
		r.Mapped = append(r.Mapped, Item{Kind: "firmware", Name: "firmware", From: "EFI", To: "EFI (OVMF, chosen by libvirt), machine q35",
			Note: "the source's boot entries are not in the backup: the firmware boots the removable-media path \\EFI\\BOOT\\BOOTX64.EFI"})
	} else {
		r.Mapped = append(r.Mapped, Item{Kind: "firmware", Name: "firmware", From: "BIOS", To: "BIOS (SeaBIOS), machine pc"})
	}
	d.Devices.Serial.Type = "pty"
	d.Devices.Graphics.Type, d.Devices.Graphics.Listen = "vnc", "127.0.0.1"
	d.Devices.Video.Model.Type = "vga"
	keys := libvirtDisks(m, &d, r)
	libvirtNICsOf(m, o, &d, r)
	libvirtNeeds(m, &d, r)
	doc, err := xml.MarshalIndent(d, "", "  ")
	if err != nil {
		return nil, err
	}
	cfg := hypervisor.VMConfig{Kind: "libvirt", Name: m.name, CPUs: d.VCPU, MemoryMiB: d.Memory.Value, Firmware: d.OS.Firmware}
	for _, k := range m.disks {
		cfg.Disks = append(cfg.Disks, hypervisor.DiskInfo{Key: keys[k.key], Name: k.name, Size: k.size, Datastore: k.datastore})
	}
	for _, n := range d.Devices.Interfaces {
		cfg.NICs = append(cfg.NICs, hypervisor.NICConfig{Network: n.Source.Network, Model: n.Model.Type})
	}
	if cfg.Native, err = json.Marshal(libvirt.NativeConfig{DomainXML: string(doc)}); err != nil {
		return nil, err
	}
	return &Plan{Config: cfg, DiskKeys: keys}, nil
}

// libvirtDisks puts m's disks into d, each on the controller of its bus
// (or the substitute), and returns the point's disk keys' target names.
func libvirtDisks(m *machine, d *domainDoc, r *Report) map[string]string {
	keys := map[string]string{}
	ctrls := map[string]int{} // SCSI model -> controller index
	units := map[int]int{}    // controller index -> next unit
	names := map[string]int{} // device name prefix -> next letter
	for _, k := range m.disks {
		b, ok := libvirtBus[k.bus]
		if !ok {
			b = libvirtBus[libvirtSubstitute]
			r.Unmapped = append(r.Unmapped, Item{Kind: "disk", Name: k.name, From: busName(k.bus), To: busName(libvirtSubstitute),
				Note: "QEMU does not emulate " + busName(k.bus) + ": the disk goes on " + busName(libvirtSubstitute) +
					", and the guest needs its AHCI driver to find it"})
		}
		prefix := map[string]string{"virtio": "vd", "ide": "hd"}[b.bus]
		if prefix == "" {
			prefix = "sd"
		}
		dev := prefix + string(rune('a'+names[prefix]))
		names[prefix]++
		keys[k.key] = dev
		var x diskDoc
		x.Type, x.Device, x.Driver.Name, x.Driver.Type = "file", "disk", "qemu", "raw"
		x.Target.Dev, x.Target.Bus = dev, b.bus
		if b.scsiModel != "" {
			idx, ok := ctrls[b.scsiModel]
			if !ok {
				idx = len(ctrls)
				ctrls[b.scsiModel] = idx
				d.Devices.Controllers = append(d.Devices.Controllers, ctrlDoc{Type: "scsi", Index: idx, Model: b.scsiModel})
			}
			x.Address = &struct {
				Type       string `xml:"type,attr"`
				Controller int    `xml:"controller,attr"`
				Bus        int    `xml:"bus,attr"`
				Target     int    `xml:"target,attr"`
				Unit       int    `xml:"unit,attr"`
			}{Type: "drive", Controller: idx, Unit: units[idx]}
			units[idx]++
		}
		if k.boot {
			x.Boot = &struct {
				Order int `xml:"order,attr"`
			}{Order: 1}
		}
		d.Devices.Disks = append(d.Devices.Disks, x)
		if ok {
			to := dev + " on " + busName(k.bus)
			r.Mapped = append(r.Mapped, Item{Kind: "disk", Name: k.name, From: busName(k.bus), To: to, Note: sizeNote(k)})
		}
	}
	return keys
}

func sizeNote(k disk) string {
	s := fmt.Sprintf("%d bytes", k.size)
	if k.boot {
		s += ", the boot disk"
	}
	return s
}

// libvirtNICsOf puts m's adapters into d on their networks.
func libvirtNICsOf(m *machine, o Options, d *domainDoc, r *Report) {
	for _, n := range m.nics {
		network := cmpOr(o.Network, n.network)
		model := libvirtModels[n.model]
		if model == "" {
			model = "virtio"
		}
		if network == "" {
			r.Unmapped = append(r.Unmapped, Item{Kind: "nic", Name: n.key, From: n.model,
				Note: "the adapter records no network: it is left out; name a libvirt network with --network"})
			continue
		}
		var x ifaceDoc
		x.Type, x.Source.Network, x.Model.Type = "network", network, model
		d.Devices.Interfaces = append(d.Devices.Interfaces, x)
		r.Mapped = append(r.Mapped, Item{Kind: "nic", Name: n.key, From: cmpOr(n.model, "unknown model"), To: model + " on libvirt network " + network,
			Note: "libvirt network " + network + " must exist when the domain starts; the adapter gets a new MAC address"})
	}
}

// libvirtNeeds says what the guest needs under KVM.
func libvirtNeeds(m *machine, d *domainDoc, r *Report) {
	virtio := false
	for _, x := range d.Devices.Disks {
		virtio = virtio || x.Target.Bus == "virtio"
	}
	for _, c := range d.Devices.Controllers {
		virtio = virtio || c.Model == "virtio-scsi"
	}
	for _, x := range d.Devices.Interfaces {
		virtio = virtio || x.Model.Type == "virtio"
	}
	switch m.guest.family {
	case windowsGuest:
		if virtio {
			r.Needs = append(r.Needs, "Windows guest: the virtio drivers (virtio-win: viostor or vioscsi for its disks, NetKVM for its adapters) "+
				"must be installed in the guest before its backup, or Windows stops at boot (INACCESSIBLE_BOOT_DEVICE)")
		} else {
			r.Needs = append(r.Needs, "Windows guest: it keeps the devices it has drivers for ("+deviceList(d)+"); "+
				"to move it to KVM's paravirtual devices, install the virtio drivers (virtio-win: viostor, vioscsi, NetKVM) in it first, "+
				"then change its disks and adapters to virtio")
		}
	case linuxGuest, otherGuest:
		if strings.Contains(deviceList(d), "vmpvscsi") {
			r.Needs = append(r.Needs, "the guest keeps VMware's Paravirtual SCSI controller: its initramfs must hold vmw_pvscsi, as it did under vSphere")
		}
	}
	if m.guest.family == otherGuest {
		r.Needs = append(r.Needs, "the point does not record the guest's operating system: check that it drives "+deviceList(d))
	}
}

// deviceList names the domain's controllers and adapter models.
func deviceList(d *domainDoc) string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, c := range d.Devices.Controllers {
		add(c.Model)
	}
	for _, x := range d.Devices.Disks {
		if x.Target.Bus != "scsi" {
			add(x.Target.Bus)
		}
	}
	for _, x := range d.Devices.Interfaces {
		add(x.Model.Type)
	}
	return strings.Join(out, ", ")
}
