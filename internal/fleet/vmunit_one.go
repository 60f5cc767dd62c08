package fleet

import (
	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/engine/attempt"
	"github.com/coffer-backup/coffer/internal/fleet/queue"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/service"
)

// A backup of one VM now (`coffer backup vm`, the API's backup-vm) is no
// policy's run, yet on a fleet its attempt is placed as a policy's is
// (the VM's host's worker for QEMU and libvirt, else the least busy
// worker reaching the connection) and handed to that worker as a VM unit
// carrying what the backup asked for (queue.OneVM). The worker builds
// the same attempt as the server's engine would (task.attemptOnce): the
// settings backupops gives the engine, the backup's own chain, tags and
// lock, and the hooks of the policies protecting the VM, read from its
// own configuration.

// handedOff says whether an attempt is handed to the worker it was placed
// on: a policy's VM-by-VM attempt, or a backup of one VM. One placed on no
// worker (the engine has none), or a group's read of a batch snapshot,
// runs in this process.
func handedOff(p engine.Placement) bool {
	return p.Worker != "" && (p.Policy != "" || p.One != nil)
}

// oneOf is what a backup of one VM asked for, as its unit carries it (nil
// for a policy's attempt).
func oneOf(p engine.Placement) *queue.OneVM {
	b := p.One
	if b == nil {
		return nil
	}
	s := b.Settings
	return &queue.OneVM{RepositoryName: b.Repository, Chain: b.Chain, Quiesce: s.Quiesce, Tags: s.Tags,
		LockedUntil: b.RetainUntil, ChangeCheck: s.ChangeCheck, HookPolicies: b.HookPolicies}
}

// unitPolicy is the policy a unit runs under, from this worker's
// configuration in effect: the unit's policy, or for a backup of one VM
// the settings it asked for (oneSettings).
func unitPolicy(svc *service.Service, cfg *policy.Config, u queue.VMUnit) (policy.Policy, error) {
	if u.One != nil {
		return oneSettings(svc, cfg, u)
	}
	p, ok := cfg.Policy(u.Policy)
	if !ok {
		return p, service.Invalidf("worker %s has no policy %s in its configuration", u.Worker, u.Policy)
	}
	if p.Repository != u.Repository {
		return p, service.Invalidf("worker %s reads policy %s's repository as %q, the leader as %q: the configurations differ",
			u.Worker, p.Name, p.Repository, u.Repository)
	}
	return p, nil
}

// oneSettings are the settings of a backup of one VM, as backupops gives
// them to the server's engine (engine.VMBackup.Settings), with the hooks
// of the policies the leader named, from this worker's configuration. The
// worker refuses when its default repository is named otherwise than the
// leader's, or when it lacks a policy the leader named, rather than write
// a point where the leader will not look for it or run other hooks.
func oneSettings(svc *service.Service, cfg *policy.Config, u queue.VMUnit) (policy.Policy, error) {
	o := u.One
	if mine := svc.RepoName(svc.Config.Repository.Location); mine != o.RepositoryName {
		return policy.Policy{}, service.Invalidf("worker %s's default repository is %s, the leader's %s: the configurations differ",
			u.Worker, mine, o.RepositoryName)
	}
	var ps []policy.Policy
	for _, name := range o.HookPolicies {
		p, ok := cfg.Policy(name)
		if !ok {
			return policy.Policy{}, service.Invalidf("worker %s has no policy %s, whose hooks the backup of %s runs: the configurations differ",
				u.Worker, name, u.VMName)
		}
		ps = append(ps, p)
	}
	return policy.Policy{Connection: u.Connection, Repository: u.Repository, Snapshot: u.SnapshotMode, Quiesce: o.Quiesce,
		Tags: o.Tags, ChangeCheck: o.ChangeCheck, Hooks: attempt.PolicyHooks(ps, u.VMName)}, nil
}

// unitRequest is the request of a unit's attempt: a policy's
// (attempt.Request), or a backup of one VM's, with the chain, tags and
// lock it asked for and no policy tag.
func unitRequest(p policy.Policy, u queue.VMUnit, s attempt.Spec) backup.VMRequest {
	if u.One == nil {
		return attempt.Request(p, s)
	}
	req := attempt.Of(p, s)
	req.Chain, req.Tags, req.RetainUntil = u.One.Chain, attempt.Tags(p, false), u.One.LockedUntil
	return req
}
