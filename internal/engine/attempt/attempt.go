// Package attempt builds the request of one attempt at a VM's backup
// under a policy. The engine's in-process attempt and a fleet worker's
// (internal/fleet, a VM unit handed off over River) build it here, so
// that a VM backed up on a worker is backed up exactly as it would be in
// the server's process: same chain, tags, lock, hooks and timeouts.
package attempt

import (
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
)

// Spec is what the dispatcher decided for an attempt, beside its policy.
type Spec struct {
	Connection   string
	VM           hypervisor.VMRef
	Mode         string
	SnapshotMode string
	JobID        int64
	// History is the repository's points, for the incremental's parent.
	History []*repo.Point
	// Now is when the attempt starts (the point's lock runs from it).
	Now time.Time
}

// Request is the backup request of an attempt of policy p's run.
func Request(p policy.Policy, s Spec) backup.VMRequest {
	req := Of(p, s)
	req.Chain = Chain(p)
	req.RetainUntil = p.RetainUntil(s.Now)
	req.Tags = Tags(p, true)
	return req
}

// Of is the part of the request that a backup of one VM (no policy's
// chain, lock or policy tag) shares with a policy's run: its caller sets
// Chain, RetainUntil and Tags.
func Of(p policy.Policy, s Spec) backup.VMRequest {
	to := p.Timeouts
	return backup.VMRequest{Connection: s.Connection, VM: s.VM, Mode: s.Mode,
		SnapshotMode: hypervisor.SnapshotMode(s.SnapshotMode), Quiesce: hypervisor.QuiescePolicy(p.Quiesce),
		Timeouts: hypervisor.Timeouts{SnapshotCreate: to.SnapshotCreate, SnapshotRemove: to.SnapshotRemove, Quiesce: to.Quiesce, Setup: to.Setup},
		JobID:    s.JobID, History: s.History, Hooks: Hooks(p, s.VM.Name)}
}

// Chain names the policy's backup chain (policy and repository) for
// connectors that keep change tracking per chain; group and VM-by-VM runs
// of a policy share it, wherever they run.
func Chain(p policy.Policy) string {
	repository := p.Repository
	if repository == "" {
		repository = "default"
	}
	return p.Name + "@" + repository
}

// Tags are a point's tags: the policy's name (for a policy's run) and
// the policy's own tags; nil when there are none.
func Tags(p policy.Policy, policyRun bool) map[string]string {
	tags := map[string]string{}
	if policyRun {
		tags["policy"] = p.Name
	}
	for k, v := range p.Tags {
		tags[k] = v
	}
	if len(tags) == 0 {
		return nil
	}
	return tags
}

// Hooks are the policy's hooks for one VM, as the backup runs them.
func Hooks(p policy.Policy, vm string) []backup.Hook {
	var out []backup.Hook
	for _, h := range p.HooksFor(vm) {
		out = append(out, backup.Hook{Name: h.Name, InGuest: h.Where == policy.HookGuest, Pre: h.Pre, Post: h.Post,
			Timeout: time.Duration(h.Timeout), Required: h.OnFailure == policy.HookFail})
	}
	return out
}

// PolicyHooks are the hooks of policies ps for VM vm, each once: what a
// backup of one VM taken now runs, so that a database VM's backup now
// flushes the database just as its scheduled ones do. The server picks
// the policies protecting the VM, and a worker the backup is handed to
// takes the same policies' hooks from its own configuration.
func PolicyHooks(ps []policy.Policy, vm string) []policy.Hook {
	var out []policy.Hook
	seen := map[string]bool{}
	for _, p := range ps {
		for _, h := range p.HooksFor(vm) {
			key := fmt.Sprintf("%s\x00%s\x00%q\x00%q", h.Name, h.Where, h.Pre, h.Post)
			if !seen[key] {
				seen[key] = true
				out = append(out, h)
			}
		}
	}
	return out
}
