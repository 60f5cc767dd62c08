package maintenance

import (
	"fmt"
	"regexp"
	"time"

	"github.com/coffer-backup/coffer/internal/bootverify"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/schedule"
)

// bootJobs are the policies' verify-boot schedules as maintenance jobs:
// they run on the scheduler that already claims each run once among
// several servers, as upkeep of the repository the policy writes to.
func bootJobs(engine *policy.Config) ([]Job, []error) {
	var jobs []Job
	var errs []error
	for _, p := range engine.Policies {
		vb := p.VerifyBoot
		if vb == nil {
			continue
		}
		add := func(format string, a ...any) {
			errs = append(errs, fmt.Errorf("policy %s: verify-boot: "+format, append([]any{p.Name}, a...)...))
		}
		ok := true
		j := Job{Name: repoOf(p) + "/verify-boot:" + p.Name, Kind: "verify-boot", Repository: repoOf(p), Spec: vb.Schedule,
			Policy: p.Name, Boot: *vb}
		if j.Boot.Points == "" {
			j.Boot.Points = policy.BootLatest
		}
		sc, err := schedule.Parse(vb.Schedule, vb.Timezone)
		_, zoneErr := schedule.Zone(vb.Timezone)
		switch {
		case zoneErr != nil:
			add("%v", zoneErr)
			ok = false
		case vb.Schedule == "":
			add("schedule is missing (cron like \"0 6 * * 0\", or @weekly)")
			ok = false
		case err != nil:
			add("schedule %q: %v (want 5 cron fields like \"0 6 * * 0\", or @weekly)", vb.Schedule, err)
			ok = false
		}
		j.Schedule = sc
		if j.Boot.Points != policy.BootLatest && j.Boot.Points != policy.BootFirstOfDay {
			add("points %q: latest (each VM's newest point) or first-of-day", vb.Points)
			ok = false
		}
		if vb.Timeout < 0 || vb.Timeout > 0 && time.Duration(vb.Timeout) < 10*time.Second {
			add("timeout %s: at least 10s (a boot under TCG takes seconds to minutes)", vb.Timeout)
			ok = false
		}
		if _, err := regexp.Compile(vb.Marker); err != nil {
			add("marker %q is not a regular expression: %v", vb.Marker, err)
			ok = false
		}
		for _, name := range p.ConnectionNames() {
			for _, c := range engine.Connections {
				// Points of QEMU and libvirt VMs carry their command
				// line; vSphere points their virtual hardware, which
				// bootverify maps to QEMU's devices. Other points
				// carry nothing QEMU can start.
				if c.Name == name && c.Kind != "qemu" && c.Kind != "libvirt" && c.Kind != "vsphere" {
					add("connection %s is %s: only QEMU, libvirt and vSphere points can be booted to verify them", name, c.Kind)
					ok = false
				}
				if c.Name == name && c.Kind == "vsphere" {
					for _, pr := range vb.Probes {
						if p, err := bootverify.ParseProbe(pr); err == nil && p.Kind == bootverify.ProbeExec {
							add("probe %s: connection %s is vSphere, whose guests' agent is VMware Tools, which QEMU cannot reach: use tcp and http probes", pr, name)
							ok = false
						}
					}
				}
			}
		}
		for _, pr := range vb.Probes {
			if _, err := bootverify.ParseProbe(pr); err != nil {
				add("%v", err)
				ok = false
			}
		}
		if ok {
			jobs = append(jobs, j)
		}
	}
	return jobs, errs
}
