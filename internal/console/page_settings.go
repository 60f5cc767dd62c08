package console

import "github.com/coffer-backup/coffer/internal/api"

// The Settings page: the engine's settings as configuration objects
// (limits, latency-control entries, resource groups, storage snapshot
// providers) and the maintenance schedules and windows, edited as
// page_config.go edits every kind.

var settingKinds = []configKind{
	{"limits", "limits", "Limits", "One object, merged with the configuration file's limits key by key: a key the file sets is the file's.",
		"tasks: 16\nper-host: 4\nrate: 400MiB/s\n", "/ui/settings"},
	{"latency-control", "latency-controls", "Latency control",
		"Slows backups reading from a datastore while its latency is above the threshold. The first entry naming a datastore applies: the file's come first.",
		"name: vms\ndatastores: [/srv/vms]\nthreshold: 30ms\n", "/ui/settings"},
	{"resource-group", "resource-groups", "Resource groups", "Datastores and hosts that share a limit of VM tasks (one storage controller).",
		"name: array-a\ndatastores: [ssd-*]\nlimit: 4\n", "/ui/settings"},
	{"storage-snapshot-provider", "storage-snapshot-providers", "Storage snapshot providers",
		"The storage snapshots that policies with group: datastore read their VMs from.",
		"name: xfs-a\nkind: reflink\nconnections: [lab]\ndatastores: [/srv/vms]\n", "/ui/settings"},
	{"maintenance-schedule", "maintenance-schedules", "Maintenance schedules",
		"A repository's upkeep (gc, verify, forget, copies, media copies), named by its repository. The scheduler takes a change within seconds.",
		"repository: main\ngc: {schedule: \"0 2 * * *\"}\ncopy: [{to: offsite, after: nightly}]\n", "/ui/settings"},
	{"maintenance-window", "maintenance-windows", "Maintenance windows", "When a repository's scheduled upkeep may run.",
		"name: night\nstart: \"22:00\"\nend: \"06:00\"\n", "/ui/settings"},
	{"replication", "replications", "Replications", "Standby copies of VMs on a host of the DR site, from their backup points; each is run now from the Restore page.",
		"name: web-dr\nvms: [web-*]\nconnection: dr-kvm\ndirectory: /srv/dr\nschedule: \"*/15 * * * *\"\n", "/ui/settings"},
	{"failover-plan", "failover-plans", "Failover plans", "A replication's standbys started at the DR site in ordered groups; each is run from the Failover plans page.",
		"name: shop\nreplication: web-dr\ngroups:\n  - vms: [{name: db-01}]\n    probes: [tcp:5432]\n", "/ui/settings"},
}

// settings lists the engine's settings and the maintenance schedules,
// each kind with its form, below what is in effect: the file, the
// catalog's change, the configuration's problems (get-effective-config,
// as `coffer config show`).
func (p *page) settings() {
	var v configPageView
	var eff api.EffectiveConfig
	if _, err := p.api.call("get-effective-config", nil, nil, nil, &eff); err == nil {
		v.Effective = &eff
	} else if !p.partial(err, &v.Problems, "the configuration in effect") {
		return
	}
	var ok bool
	if v.Sections, ok = p.configSections(settingKinds, &v.Problems); ok {
		p.show("settings", "Settings", "settings", v)
	}
}
