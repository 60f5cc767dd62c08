package route

import (
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
)

// GlobalPool is the key of the pool every unit of work needs one slot
// of; its capacity is limits.tasks.
const GlobalPool = "global"

// SlotNeed is one slot of a limit's pool: its key ("policy:nightly",
// "host:lab/h1", "datastore:lab/ds1", "group:ctrl-a", "repo:main") and
// its capacity (0 or less: unlimited, so no slot is taken).
type SlotNeed struct {
	Key string
	Cap int
}

// SlotNeeds lists the pools, besides the global one, a VM of policy p on
// connection conn occupies a slot of: the policy's own cap, its host and
// datastores (unless hypervisorSide is false: a read from a storage
// snapshot spares the hypervisor), its resource groups, and the
// repository's write streams (when repository is true). The engine
// schedules with it and internal/plan simulates with it, so a plan
// cannot count the limits differently from a run.
func SlotNeeds(cfg *policy.Config, limits policy.Limits, p policy.Policy, conn string, vm hypervisor.VM, hypervisorSide, repository bool) []SlotNeed {
	out := []SlotNeed{{"policy:" + p.Name, p.Tasks}}
	if hypervisorSide {
		out = append(out, SlotNeed{"host:" + conn + "/" + vm.Host, limits.PerHost})
		for _, ds := range vm.Datastores {
			out = append(out, SlotNeed{"datastore:" + conn + "/" + ds, limits.PerDatastore})
		}
	}
	for _, g := range cfg.ResourceGroups {
		if g.Contains(vm) {
			out = append(out, SlotNeed{"group:" + g.Name, g.Limit})
		}
	}
	if repository {
		out = append(out, SlotNeed{"repo:" + p.Repository, RepositoryStreams(cfg, limits, p.Repository)})
	}
	return out
}

// RepositoryStreams is the number of concurrent write streams into a
// repository: its own `streams`, else limits.per-repository.
func RepositoryStreams(cfg *policy.Config, limits policy.Limits, repository string) int {
	if r, ok := cfg.Repository(repository); ok && r.Streams > 0 {
		return r.Streams
	}
	return limits.PerRepository
}
