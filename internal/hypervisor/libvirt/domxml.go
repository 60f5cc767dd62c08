package libvirt

import (
	"encoding/hex"
	"encoding/xml"
	"fmt"
	"path/filepath"
	"strings"

	golibvirt "github.com/digitalocean/go-libvirt"
)

// domainXML is the part of libvirt's domain XML coffer reads. The whole
// document is recorded with each backup point for restore.
type domainXML struct {
	Name   string `xml:"name"`
	UUID   string `xml:"uuid"`
	Memory struct {
		Value int64  `xml:",chardata"`
		Unit  string `xml:"unit,attr"`
	} `xml:"memory"`
	VCPU int `xml:"vcpu"`
	OS   struct {
		Loader string `xml:"loader"`
	} `xml:"os"`
	Metadata struct {
		Standby *struct{} `xml:"https://coffer-backup.org/xmlns/standby/1 standby"`
	} `xml:"metadata"`
	Devices struct {
		Disks      []diskXML      `xml:"disk"`
		Interfaces []interfaceXML `xml:"interface"`
		Channels   []channelXML   `xml:"channel"`
	} `xml:"devices"`
}

type diskXML struct {
	Type   string `xml:"type,attr"`   // file, block, network, volume
	Device string `xml:"device,attr"` // disk, cdrom, floppy, lun
	Driver struct {
		Type string `xml:"type,attr"` // qcow2, raw
	} `xml:"driver"`
	Source struct {
		File string `xml:"file,attr"`
		Dev  string `xml:"dev,attr"`
		Pool string `xml:"pool,attr"`
		Vol  string `xml:"volume,attr"`
		Name string `xml:"name,attr"` // network disks
	} `xml:"source"`
	Target struct {
		Dev string `xml:"dev,attr"`
		Bus string `xml:"bus,attr"`
	} `xml:"target"`
	ReadOnly *struct{} `xml:"readonly"`
}

type interfaceXML struct {
	Type string `xml:"type,attr"`
	MAC  struct {
		Address string `xml:"address,attr"`
	} `xml:"mac"`
	Source struct {
		Network string `xml:"network,attr"`
		Bridge  string `xml:"bridge,attr"`
	} `xml:"source"`
	Model struct {
		Type string `xml:"type,attr"`
	} `xml:"model"`
	Alias struct {
		Name string `xml:"name,attr"`
	} `xml:"alias"`
}

type channelXML struct {
	Target struct {
		Type  string `xml:"type,attr"`
		Name  string `xml:"name,attr"`
		State string `xml:"state,attr"`
	} `xml:"target"`
}

func parseDomain(doc string) (*domainXML, error) {
	var d domainXML
	if err := xml.Unmarshal([]byte(doc), &d); err != nil {
		return nil, fmt.Errorf("libvirt: domain XML: %w", err)
	}
	return &d, nil
}

// path is where the disk's data lives: a file or block device.
func (d diskXML) path() string {
	switch {
	case d.Source.File != "":
		return d.Source.File
	case d.Source.Dev != "":
		return d.Source.Dev
	case d.Source.Pool != "":
		return d.Source.Pool + "/" + d.Source.Vol
	}
	return d.Source.Name
}

// backedUp reports whether coffer backs the disk up: writable disks, not
// CD-ROMs or read-only images (installer ISOs, shared seeds), which libvirt's
// backup job refuses or which are no VM data.
func (d diskXML) backedUp() bool {
	return (d.Device == "disk" || d.Device == "" || d.Device == "lun") && d.ReadOnly == nil
}

// format is the disk image's format as coffer names it.
func (d diskXML) format() string {
	if d.Driver.Type == "" {
		return "raw"
	}
	return d.Driver.Type
}

// guestAgentConnected reports whether the guest agent's channel is
// connected: libvirt tracks the virtio-serial port's state, so asking does
// not wait for an agent that is not there.
func (d *domainXML) guestAgentConnected() bool {
	for _, ch := range d.Devices.Channels {
		if ch.Target.Type == "virtio" && ch.Target.Name == "org.qemu.guest_agent.0" {
			return ch.Target.State == "connected"
		}
	}
	return false
}

func (d *domainXML) memoryMiB() int64 {
	switch strings.ToLower(d.Memory.Unit) {
	case "b", "bytes":
		return d.Memory.Value >> 20
	case "mib", "m":
		return d.Memory.Value
	case "gib", "g":
		return d.Memory.Value << 10
	}
	return d.Memory.Value >> 10 // KiB, libvirt's default
}

// poolXML is the part of a storage pool's XML coffer reads.
type poolXML struct {
	Name   string `xml:"name"`
	Target struct {
		Path string `xml:"path"`
	} `xml:"target"`
}

// pool is a storage pool as a datastore: its name and the directory (or
// device directory) its volumes live in.
type pool struct{ name, dir string }

// datastoreOf names the datastore of a disk: the pool whose directory
// holds it, or the pool a volume disk names; otherwise the disk's
// directory, so that disks on the same filesystem still share the engine's
// per-datastore limit.
func datastoreOf(d diskXML, pools []pool) string {
	if d.Source.Pool != "" {
		return d.Source.Pool
	}
	p := d.path()
	best := ""
	bestLen := -1
	for _, pl := range pools {
		if pl.dir != "" && strings.HasPrefix(p, strings.TrimSuffix(pl.dir, "/")+"/") && len(pl.dir) > bestLen {
			best, bestLen = pl.name, len(pl.dir)
		}
	}
	if best != "" {
		return best
	}
	if p == "" {
		return ""
	}
	return "dir:" + filepath.Dir(p)
}

// formatUUID spells a libvirt UUID as in the domain XML.
func formatUUID(u golibvirt.UUID) string {
	h := hex.EncodeToString(u[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func parseUUID(s string) (golibvirt.UUID, error) {
	var u golibvirt.UUID
	b, err := hex.DecodeString(strings.ReplaceAll(s, "-", ""))
	if err != nil || len(b) != len(u) {
		return u, fmt.Errorf("libvirt: %q is not a UUID", s)
	}
	copy(u[:], b)
	return u, nil
}

// stateName maps libvirt's domain states to the inventory's power states.
func stateName(st int32) string {
	switch golibvirt.DomainState(st) {
	case golibvirt.DomainRunning, golibvirt.DomainBlocked:
		return "running"
	case golibvirt.DomainPaused:
		return "paused"
	case golibvirt.DomainPmsuspended:
		return "suspended"
	case golibvirt.DomainShutdown, golibvirt.DomainShutoff, golibvirt.DomainCrashed:
		return "stopped"
	}
	return "unknown"
}
