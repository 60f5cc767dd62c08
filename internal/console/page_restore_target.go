package console

import (
	"net/http"
	"net/url"

	"github.com/coffer-backup/coffer/internal/api"
)

// The "as a new VM" step's target: a directory of the server (a QEMU
// point), or a connection of the configuration, the point's own platform
// or another. Onto another platform the step shows, before the restore
// starts, how the VM maps onto it: the restore-vm operation's dry run.

// restoreTarget is a connection the wizard offers to restore through.
type restoreTarget struct {
	Name, Kind string
	// Other: of another platform than the point's VM.
	Other bool
}

// vmTargets lists the connections a point's VM can be restored through:
// its own platform's, and those coffer maps it onto (libvirt, vSphere).
// It returns the point's platform too: its own record's, or else its
// connection's kind.
func (p *page) vmTargets(pt api.BackupPoint) ([]restoreTarget, string) {
	var conns []api.ConfigObject
	if _, err := p.api.call("list-connections", nil, nil, nil, &conns); err != nil {
		return nil, pt.SourceKind
	}
	platform := pt.SourceKind
	for _, c := range conns {
		if kind, _ := c.Spec["kind"].(string); platform == "" && c.Name == pt.Connection && !c.Overridden {
			platform = kind
		}
	}
	var out []restoreTarget
	for _, c := range conns {
		kind, _ := c.Spec["kind"].(string)
		if c.Overridden || kind != platform && kind != "libvirt" && kind != "vsphere" {
			continue
		}
		out = append(out, restoreTarget{Name: c.Name, Kind: kind, Other: kind != platform})
	}
	return out, platform
}

// chooseTarget sets the view's chosen connection and, onto another
// platform, its mapping (or why there is none).
func (p *page) chooseTarget(v *restoreView) {
	v.Targets, v.Platform = p.vmTargets(v.Point)
	q := p.r.URL.Query()
	v.Network = q.Get("network")
	for _, t := range v.Targets {
		if t.Name == q.Get("connection") {
			v.Target = t
		}
	}
	switch {
	case v.Target.Other:
		v.mapping(p.api.call("restore-vm", p.pointParams(), url.Values{"connection": {v.Target.Name}},
			api.RestoreVMRequest{DryRun: true, Network: v.Network}, &v.dry))
		v.MapTo = v.Target.Kind
	case v.Target.Name == "" && v.Platform == "vsphere":
		// Into a directory of the server, as a QEMU VM.
		v.mapping(p.api.call("restore-vm", p.pointParams(), nil, api.RestoreVMRequest{DryRun: true, Dir: v.Default.Dir}, &v.dry))
		v.MapTo = "qemu"
	}
}

// mapping keeps a dry run's report, or why there is none.
func (v *restoreView) mapping(_ http.Header, err error) {
	if err != nil {
		v.MappingErr = err.Error()
		return
	}
	v.Mapping = v.dry.Mapping
}
