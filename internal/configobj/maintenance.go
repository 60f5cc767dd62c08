package configobj

import (
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/maintenance"
)

// The maintenance schedules as objects: the entries of the maintenance
// section's windows (by name) and repositories (each repository's jobs:
// gc, verify, forget, copy, media-copy; named by its repository). The
// file's entries win by name, as policies do; the catalog's fill in the
// names the file does not use. The section's other keys (task-history,
// takeover-after, ...) are the file's alone. A change is in effect on
// every server within seconds: the lease holder's scheduler resolves its
// jobs again (a job whose settings did not change keeps its next slot).

// maintenanceKey is the key of a maintenance kind's section.
var maintenanceKey = map[Kind]string{MaintenanceWindow: "windows", MaintenanceSchedule: "repositories"}

// decodeMaintenance decodes an entry of the maintenance section with
// the file's decoder, as if it were the section's only entry.
func decodeMaintenance(k Kind, list *yaml.Node) (any, error) {
	section := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{
		{Kind: yaml.ScalarNode, Tag: "!!str", Value: maintenanceKey[k]}, list}}
	var c maintenance.Config
	if err := config.DecodeNode(section, &c, "maintenance"); err != nil {
		return nil, err
	}
	if k == MaintenanceWindow {
		return c.Windows[0], nil
	}
	return c.Repositories[0], nil
}

// fileMaintenance lists the file's maintenance entries as objects.
func fileMaintenance(m *maintenance.Config) []typed {
	var out []typed
	for _, w := range m.Windows {
		out = append(out, typed{MaintenanceWindow, w, w.Name})
	}
	for _, r := range m.Repositories {
		out = append(out, typed{MaintenanceSchedule, r, r.Repository})
	}
	return out
}

// putMaintenance returns a copy of m with v (a window or a repository's
// jobs) in place of the entry of its name, or appended; false when v is
// neither.
func putMaintenance(m *maintenance.Config, v any) (*maintenance.Config, bool) {
	n := *m
	switch x := v.(type) {
	case maintenance.Window:
		n.Windows = putNamed(n.Windows, x, func(y maintenance.Window) string { return y.Name })
	case maintenance.Repository:
		n.Repositories = putNamed(n.Repositories, x, func(y maintenance.Repository) string { return y.Repository })
	default:
		return m, false
	}
	return &n, true
}

// deleteMaintenance returns a copy of m without the catalog's entry.
func deleteMaintenance(m *maintenance.Config, k Kind, name string) *maintenance.Config {
	n := *m
	switch k {
	case MaintenanceWindow:
		n.Windows = dropNamed(n.Windows, name, func(y maintenance.Window) string { return y.Name })
	case MaintenanceSchedule:
		n.Repositories = dropNamed(n.Repositories, name, func(y maintenance.Repository) string { return y.Repository })
	}
	return &n
}

// cloneMaintenance copies the lists a merge appends to.
func cloneMaintenance(m *maintenance.Config) *maintenance.Config {
	if m == nil {
		return &maintenance.Config{}
	}
	n := *m
	n.Windows, n.Repositories = slices.Clone(n.Windows), slices.Clone(n.Repositories)
	return &n
}
