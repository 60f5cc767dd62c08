package policy

import (
	"fmt"
	"path"
	"sort"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// Selector matches VMs. Names, hosts, datastores and tag values are exact
// strings or globs (path.Match syntax: *, ?, [a-z]).
//
// In `select`, every criterion that is given must match (a VM is selected
// when its name matches one of names AND it carries every tag AND it runs on
// one of hosts AND one of its datastores matches); an empty selector
// selects every VM. In `exclude`, ANY matching criterion excludes the VM.
type Selector struct {
	Names      []string          `yaml:"names"`
	Tags       map[string]string `yaml:"tags"`
	Hosts      []string          `yaml:"hosts"`
	Datastores []string          `yaml:"datastores"`
}

// Empty reports a selector without criteria.
func (s Selector) Empty() bool {
	return len(s.Names)+len(s.Tags)+len(s.Hosts)+len(s.Datastores) == 0
}

// MatchesAll reports whether vm meets every given criterion.
func (s Selector) MatchesAll(vm hypervisor.VM) bool {
	if len(s.Names) > 0 && !anyMatch(s.Names, vm.Name) {
		return false
	}
	for k, pat := range s.Tags {
		v, ok := vm.Tags[k]
		if !ok || !match(pat, v) {
			return false
		}
	}
	if len(s.Hosts) > 0 && !anyMatch(s.Hosts, vm.Host) {
		return false
	}
	if len(s.Datastores) > 0 && !anyMatchAny(s.Datastores, vm.Datastores) {
		return false
	}
	return true
}

// MatchesAny reports whether vm meets at least one criterion.
func (s Selector) MatchesAny(vm hypervisor.VM) bool {
	if anyMatch(s.Names, vm.Name) || anyMatch(s.Hosts, vm.Host) || anyMatchAny(s.Datastores, vm.Datastores) {
		return true
	}
	for k, pat := range s.Tags {
		if v, ok := vm.Tags[k]; ok && match(pat, v) {
			return true
		}
	}
	return false
}

// Selects reports whether the policy protects vm.
func (p Policy) Selects(vm hypervisor.VM) bool {
	return p.Select.MatchesAll(vm) && !p.Exclude.MatchesAny(vm)
}

// SelectVMs filters an inventory, keeping its order.
func (p Policy) SelectVMs(vms []hypervisor.VM) []hypervisor.VM {
	var out []hypervisor.VM
	for _, vm := range vms {
		if p.Selects(vm) {
			out = append(out, vm)
		}
	}
	return out
}

// Groups returns the names of the resource groups vm belongs to.
func (c *Config) Groups(vm hypervisor.VM) []string {
	var out []string
	for _, g := range c.ResourceGroups {
		if g.Contains(vm) {
			out = append(out, g.Name)
		}
	}
	return out
}

// Contains reports whether vm's host or one of its datastores is in g.
func (g ResourceGroup) Contains(vm hypervisor.VM) bool {
	return anyMatch(g.Hosts, vm.Host) || anyMatchAny(g.Datastores, vm.Datastores)
}

func match(pattern, s string) bool {
	ok, err := path.Match(pattern, s)
	return err == nil && ok
}

func anyMatch(patterns []string, s string) bool {
	for _, p := range patterns {
		if match(p, s) {
			return true
		}
	}
	return false
}

func anyMatchAny(patterns, values []string) bool {
	for _, v := range values {
		if anyMatch(patterns, v) {
			return true
		}
	}
	return false
}

func sorted(s []string) []string {
	sort.Strings(s)
	return s
}

// LiveReadProblem says why backing vm up with snapshot: as-is and no
// storage snapshot would not give a consistent image ("" when it would):
// as-is takes no snapshot, so the disks of a running VM are read while it
// writes to them. The engine fails such a VM, and `coffer policy check`
// names the selected VMs it would fail.
func LiveReadProblem(vm hypervisor.VM) string {
	if vm.PowerState != "running" {
		return ""
	}
	return fmt.Sprintf("%s is running and snapshot: as-is takes no snapshot, so its disks would be read while it writes to them "+
		"and the backup would not be consistent: stop the VM before its backup, or use snapshot: crash-consistent", vm.Name)
}
