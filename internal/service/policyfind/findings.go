// Package policyfind finds what a policy will do differently from what
// its settings seem to ask, before it runs (`policy check`, `run`, the
// server's start): pure functions of the configuration and the VMs a
// policy selects.
package policyfind

import (
	"context"
	"fmt"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	hvall "github.com/coffer-backup/coffer/internal/hypervisor/all"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/storagesnap"
)

// A finding is something a policy will do differently from what its
// settings seem to ask, found before it runs: an error refuses the
// configuration (`policy check`, `run` and `server` exit 2), a warning says
// what will really happen.
type Finding = api.Finding

// The levels of a finding.
const (
	LevelError   = "error"
	levelWarning = "warning"
)

func findingf(level, format string, a ...any) Finding {
	return api.Finding{Level: level, Message: fmt.Sprintf(format, a...)}
}

// hasStorageSnapshots reports whether group: datastore can work on a
// connection: its connector provides storage snapshots itself, or a
// provider of the storage-snapshots section covers it.
func hasStorageSnapshots(cfg *policy.Config, c policy.Connection) bool {
	return KindOf(c.Kind).StorageSnapshots || cfg.StorageSnapshots.HasProvider(c.Name)
}

// groupDatastore reports whether the policy's VMs are read from storage
// snapshots (every one of its connections has a provider).
func groupDatastore(cfg *policy.Config, p policy.Policy) bool {
	if p.Group != "datastore" {
		return false
	}
	for _, name := range p.ConnectionNames() {
		c, ok := cfg.Connection(name)
		if !ok || !hasStorageSnapshots(cfg, c) {
			return false
		}
	}
	return true
}

// PolicyFindings checks a valid policy against what its connections can do,
// from the configuration alone.
func PolicyFindings(cfg *policy.Config, p policy.Policy) []Finding {
	var out []Finding
	where := "policy " + p.Name
	mode := hypervisor.SnapshotMode(nameOr(p.Snapshot, string(hypervisor.CrashConsistent)))
	for _, name := range p.ConnectionNames() {
		c, ok := cfg.Connection(name)
		if !ok {
			continue // Validate reports it
		}
		if p.Group == "datastore" && !hasStorageSnapshots(cfg, c) {
			out = append(out, findingf(LevelError, "%s: group: datastore needs a storage snapshot provider, and connection %s (%s) has none: "+
				"add a storage-snapshots entry (kind reflink, btrfs or exec) naming connection %s and its datastore directories. "+
				"Or remove `group: datastore` from the policy: its VMs are then backed up one by one, each through its own hypervisor snapshot", where, c.Name, c.Kind, c.Name))
		}
		if c.Kind == "vsphere" && hasGuestHooks(p) {
			if user, err := hvall.VSphereGuestUser(hvall.Config{Connection: c}); err == nil && user == "" {
				out = append(out, findingf(LevelError, "%s: its guest hooks run through VMware Tools, which needs a guest account: "+
					"set guest-user and guest-password-file in the options of connection %s", where, c.Name))
			}
		}
		if why, no := KindOf(c.Kind).Cannot[mode]; no {
			out = append(out, findingf(LevelError, "%s: snapshot: %s is not possible on connection %s (%s): %s; choose another snapshot mode",
				where, mode, c.Name, c.Kind, why))
		}
	}
	if mode == hypervisor.AsIs && !groupDatastore(cfg, p) {
		out = append(out, findingf(levelWarning, "%s: snapshot: as-is takes no snapshot and no storage snapshot is taken either: "+
			"a running VM would be read while it writes to its disks, so its backup fails; only VMs that are stopped or suspended are backed up", where))
	}
	if p.Quiesce != "" && mode != hypervisor.Quiesced {
		out = append(out, findingf(levelWarning, "%s: quiesce: %s only applies with snapshot: quiesced; with %s it is ignored", where, p.Quiesce, mode))
	}
	return out
}

func hasGuestHooks(p policy.Policy) bool {
	for _, h := range p.Hooks {
		if h.Where == policy.HookGuest {
			return true
		}
	}
	return false
}

// SelectionFindings says what will happen to the VMs a policy selects on
// one connection, from its inventory.
func SelectionFindings(cfg *policy.Config, p policy.Policy, conn string, selected []hypervisor.VM) []Finding {
	var out []Finding
	where := fmt.Sprintf("policy %s on %s", p.Name, conn)
	mode := hypervisor.SnapshotMode(nameOr(p.Snapshot, string(hypervisor.CrashConsistent)))
	group := groupDatastore(cfg, p)
	var running, noAgent, spanning []string
	for _, vm := range selected {
		if policy.LiveReadProblem(vm) != "" {
			running = append(running, vm.Name)
		}
		if !vm.GuestAgent {
			noAgent = append(noAgent, vm.Name)
		}
		if len(vm.Datastores) > 1 {
			spanning = append(spanning, vm.Name)
		}
	}
	if mode == hypervisor.AsIs && !group && len(running) > 0 {
		out = append(out, findingf(levelWarning, "%s: %s running and would fail with snapshot: as-is (stop them first, or use crash-consistent): %s",
			where, selectedVMs(len(running), "is", "are"), clip(strings.Join(running, ", "), 400)))
	}
	if mode == hypervisor.Quiesced && len(noAgent) > 0 {
		what := "snapshots will be crash-consistent (quiesce: fallback)"
		if p.Quiesce == string(hypervisor.QuiesceRequired) {
			what = "backups will fail (quiesce: required)"
		}
		out = append(out, findingf(levelWarning, "%s: %s no guest agent running, so %s: %s",
			where, selectedVMs(len(noAgent), "has", "have"), what, clip(strings.Join(noAgent, ", "), 400)))
	}
	if group && len(cfg.StorageSnapshots) > 0 {
		out = append(out, providerFindings(cfg, p, conn, selected)...)
	}
	if group && len(spanning) > 0 {
		out = append(out, findingf(levelWarning, "%s: %s disks on several datastores, backed up one by one, not from a storage snapshot: %s",
			where, selectedVMs(len(spanning), "has", "have"), clip(strings.Join(spanning, ", "), 400)))
	}
	return out
}

// selectedVMs is "1 selected VM is" or "3 selected VMs are".
func selectedVMs(n int, one, many string) string {
	if n == 1 {
		return "1 selected VM " + one
	}
	return fmt.Sprintf("%d selected VMs %s", n, many)
}

// KindOf is the registered kind (the zero kind for an unknown one,
// which Validate and EngineConfig report).
func KindOf(name string) hvall.Kind {
	k, _ := hvall.Lookup(name)
	return k
}

func nameOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// providerFindings says, per datastore of the selected VMs, whether its
// storage snapshot can really be taken: a provider covers it and can
// snapshot it here (checked without creating anything), and what happens
// to its VMs when not.
func providerFindings(cfg *policy.Config, p policy.Policy, conn string, selected []hypervisor.VM) []Finding {
	var out []Finding
	where := fmt.Sprintf("policy %s on %s", p.Name, conn)
	then := "its VMs fail (storage-fallback: fail; set storage-fallback: vm to back them up one by one instead)"
	if p.StorageFallback == "vm" {
		then = "its VMs are backed up one by one (storage-fallback: vm)"
	}
	count := map[string]int{}
	paths := map[string][]string{} // each datastore's disk files, to find its directory by
	var order []string
	for _, vm := range selected {
		if len(vm.Datastores) == 1 {
			ds := vm.Datastores[0]
			if count[ds] == 0 {
				order = append(order, ds)
			}
			count[ds]++
			for _, d := range vm.Disks {
				paths[ds] = append(paths[ds], d.Path)
			}
		}
	}
	for _, ds := range order {
		sp, root, ok := cfg.StorageSnapshots.ProviderOf(conn, ds, paths[ds])
		if !ok {
			add := "add it to a provider's datastores"
			if len(paths[ds]) > 0 {
				if e, _, vs := policy.VSpherePath(paths[ds][0]); vs {
					add = fmt.Sprintf("add %q to the datastores of an exec provider (the array or filer behind it)", e)
				}
			}
			out = append(out, findingf(levelWarning, "%s: datastore %s (%d VMs): no storage-snapshots provider covers it, so %s; %s",
				where, ds, count[ds], then, add))
			continue
		}
		if err := storagesnap.Check(context.Background(), sp, root); err != nil {
			out = append(out, findingf(levelWarning, "%s: datastore %s (%d VMs): provider %s (%s) cannot snapshot it, so %s: %v",
				where, ds, count[ds], sp.Name, sp.Kind, then, err))
		}
	}
	return out
}
