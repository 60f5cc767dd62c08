// Package restorewizard is what the console's restore wizard offers for
// a backup point: the kinds of restore and why a kind is not for this
// point, the connections a VM can be restored through, of its own
// platform or another, and the mapping onto another platform (through
// the API's operations the console calls). The console's pages show it.
package restorewizard

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
)

// Kind is one of the wizard's first step's choices.
type Kind struct{ ID, Title, About string }

// Kinds are the wizard's first step, in the order it offers them.
var Kinds = []Kind{
	{"vm", "As a new VM", "The VM made again from its recorded configuration, with a new name, UUID and MAC addresses, its disks restored into it: in a directory of the server (QEMU), or through a connection, of its own platform or another (a vSphere VM as a libvirt domain, a QEMU or libvirt VM on vSphere); started if you ask."},
	{"original", "Onto the original VM", "The backup written over the disks of the original VM, which must be powered off. What it holds now is lost."},
	{"disk", "One disk", "One disk restored as a file (raw or qcow2) in the server's restore directory."},
	{"instant", "Instant recovery", "The VM started at once from the backup (its disks read from the repository, its writes kept aside); then commit it onto storage while it runs, or discard it."},
}

// Limits says which kinds a point cannot be restored as, and why (the
// API would refuse them with the same reason; the wizard says it before
// the operator fills a form).
func Limits(pt api.BackupPoint) map[string]string {
	why := map[string]string{"vm": "", "original": "", "disk": "", "instant": ""}
	switch pt.SourceKind {
	case "disk":
		why["vm"] = "this point holds disk images, not a VM: restore its disks"
		why["original"] = why["vm"]
		why["instant"] = why["vm"]
	case "qemu":
		why["original"] = "a QEMU VM is restored as a new VM; its disks are files you can restore one by one"
	case "vsphere":
		// Its VM runs on an ESXi host, from coffer's NFS export: the
		// form asks for the host and the export's address.
	default:
		why["instant"] = "the console starts instant recoveries of QEMU and vSphere VMs; a libvirt domain's runs with coffer instant start"
	}
	if pt.Connection == "" && pt.SourceKind != "qemu" && pt.SourceKind != "disk" {
		why["original"] = "the point names no connection to restore through"
	}
	return why
}

// SafeFile keeps what may go in a file name of the restore directory.
func SafeFile(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, s)
}

// Target is a connection "as a new VM" can restore through.
type Target struct {
	Name, Kind string
	// Other: of another platform than the point's VM.
	Other bool
}

// Targets lists the connections of conns a point's VM can be restored
// through: its own platform's, and those coffer maps it onto (libvirt,
// vSphere). It returns the point's platform too: its own record's, or
// else its connection's kind.
func Targets(conns []api.ConfigObject, pt api.BackupPoint) ([]Target, string) {
	platform := pt.SourceKind
	for _, c := range conns {
		if kind, _ := c.Spec["kind"].(string); platform == "" && c.Name == pt.Connection && !c.Overridden {
			platform = kind
		}
	}
	var out []Target
	for _, c := range conns {
		kind, _ := c.Spec["kind"].(string)
		if c.Overridden || kind != platform && kind != "libvirt" && kind != "vsphere" {
			continue
		}
		out = append(out, Target{Name: c.Name, Kind: kind, Other: kind != platform})
	}
	return out, platform
}

// Call is an API operation as the console calls it.
type Call func(op string, params map[string]string, query url.Values, body, out any) (http.Header, error)

// Choice is the "as a new VM" step's target: a directory of the server
// (none chosen), or a connection of the configuration, the point's own
// platform or another. Onto another platform (and a vSphere point into a
// directory, as a QEMU VM) the step shows, before the restore starts,
// how the VM maps: the restore-vm operation's dry run.
type Choice struct {
	Targets []Target
	Target  Target // the chosen one; none: a directory of the server
	// Platform is the point's VM's (qemu, vsphere, libvirt); MapTo the
	// platform Mapping maps it onto, and MappingErr why there is none.
	Platform, MapTo string
	Mapping         *api.VMMapping
	MappingErr      string
	Network         string // the target network asked for
}

// Choose reads the step's choice from its query (connection, network)
// for point pt (params: its repo and point), whose directory restore
// would go to dir.
func Choose(call Call, pt api.BackupPoint, params map[string]string, q url.Values, dir string) Choice {
	var c Choice
	var conns []api.ConfigObject
	c.Platform = pt.SourceKind
	if _, err := call("list-connections", nil, nil, nil, &conns); err == nil {
		c.Targets, c.Platform = Targets(conns, pt)
	}
	c.Network = q.Get("network")
	for _, t := range c.Targets {
		if t.Name == q.Get("connection") {
			c.Target = t
		}
	}
	var dry api.RestoredVM
	var err error
	switch {
	case c.Target.Other:
		_, err = call("restore-vm", params, url.Values{"connection": {c.Target.Name}}, api.RestoreVMRequest{DryRun: true, Network: c.Network}, &dry)
		c.MapTo = c.Target.Kind
	case c.Target.Name == "" && c.Platform == "vsphere":
		_, err = call("restore-vm", params, nil, api.RestoreVMRequest{DryRun: true, Dir: dir}, &dry)
		c.MapTo = "qemu"
	default:
		return c
	}
	if err != nil {
		c.MappingErr = err.Error()
	}
	c.Mapping = dry.Mapping
	return c
}
