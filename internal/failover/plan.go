package failover

import (
	"context"
	"log/slog"
	"time"
)

// RunPlan fails over the plan's VMs group by group: each VM of a group
// is failed over (Failover, or Planned onto final[VM] when final names
// it), then its re-addressing script, the group's probes (at the VM's
// Address, or through its guest agent) and its script run, then the
// group's delay; a group that did not pass stops the plan there, with
// the VMs already started left running (a failover is not undone).
func RunPlan(ctx context.Context, plan Plan, final map[string]string, o Options) (*Report, []*Started, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	rep := &Report{Plan: plan.Name, Started: time.Now().UTC(), Passed: true, watch: o.Watch}
	defer func() { rep.Duration = time.Since(rep.Started) }()
	var all []*Started
	for gi, g := range plan.Groups {
		n := gi + 1
		ms := make([]*machine, len(g.VMs))
		for i, vm := range g.VMs {
			began := time.Now()
			var st *Started
			var err error
			if vm.Remote != nil {
				st, err = failoverRemote(ctx, rep, n, vm, final, o)
			} else if p, ok := final[vm.Name]; ok {
				st, err = Planned(ctx, vm, p, o)
			} else {
				st, err = Failover(ctx, vm, o)
			}
			rep.step(n, vm.Name, "failover", began, err, "the standby runs as the VM, on its mapped networks")
			o.Log.Info("failover: VM started", "plan", plan.Name, "group", n, "vm", vm.Name, "err", err)
			if err != nil {
				rep.Passed = false
				return rep, all, nil
			}
			all = append(all, st)
			ms[i] = st.machine
		}
		if !runGroupChecks(ctx, rep, n, g, ms, o.Log) {
			rep.Passed = false
			return rep, all, nil
		}
	}
	return rep, all, nil
}
