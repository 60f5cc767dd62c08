package console

import (
	"time"

	"github.com/coffer-backup/coffer/internal/api"
)

// defaultRPO is how old a VM's newest point may be when none of its
// policies sets an rpo: a day, what a nightly schedule promises.
const defaultRPO = 24 * time.Hour

// rpos are the policies' recovery point objectives (check-policies).
type rpos map[string]time.Duration

func rposOf(check api.PolicyCheck) rpos {
	out := rpos{}
	for _, p := range check.Policies {
		if p.RPOSeconds > 0 {
			out[p.Name] = time.Duration(p.RPOSeconds * float64(time.Second))
		}
	}
	return out
}

// of is a VM's RPO: the strictest of its policies' (a VM two policies
// protect must meet both), or the default when none sets one.
func (r rpos) of(vm api.VM) time.Duration {
	var strictest time.Duration
	for _, p := range vm.Policies {
		if d, ok := r[p]; ok && (strictest == 0 || d < strictest) {
			strictest = d
		}
	}
	if strictest == 0 {
		return defaultRPO
	}
	return strictest
}

// rank orders VMs by how much they need a look: no policy, no point yet,
// a point older than its RPO, then the protected.
func (r rpos) rank(vm api.VM, now time.Time) int {
	switch {
	case len(vm.Policies) == 0:
		return 0
	case vm.LastBackup.IsZero():
		return 1
	case now.Sub(vm.LastBackup) > r.of(vm):
		return 2
	}
	return 3
}
