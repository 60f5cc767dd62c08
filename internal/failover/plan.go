package failover

import (
	"context"
	"log/slog"
	"time"
)

// RunPlan fails over the plan's VMs group by group: the VMs of a group
// are failed over at once (startGroup; Failover, or Planned onto
// final[VM] when final names it), then, once all of them started, each
// one's re-addressing script, the group's probes (at the VM's Address,
// or through its guest agent) and its script run, then the group's
// delay; a group that did not pass stops the plan there, with the VMs
// already started left running (a failover is not undone).
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
		out := make([]*Started, len(g.VMs))
		errs := make([]error, len(g.VMs))
		steps := make([]stepBuf, len(g.VMs))
		started := true
		startGroup(len(g.VMs), func(i int) {
			out[i], errs[i] = failoverOne(ctx, n, g.VMs[i], final, o, &steps[i])
		}, func(i int) {
			rep.add(steps[i]...)
			o.Log.Info("failover: VM started", "plan", plan.Name, "group", n, "vm", g.VMs[i].Name, "err", errs[i])
			if errs[i] != nil {
				started = false
				return
			}
			all = append(all, out[i])
			ms[i] = out[i].machine
		})
		if !started || !runGroupChecks(ctx, rep, n, g, ms, o.Log) {
			rep.Passed = false
			return rep, all, nil
		}
	}
	return rep, all, nil
}

// failoverOne fails vm of group n over, its steps kept in steps.
func failoverOne(ctx context.Context, n int, vm VM, final map[string]string, o Options, steps *stepBuf) (*Started, error) {
	began := time.Now()
	var st *Started
	var err error
	if vm.Remote != nil {
		st, err = failoverRemote(ctx, func(name string, began time.Time, err error, detail string) {
			steps.step(n, vm.Name, name, began, err, detail)
		}, vm, final, o)
	} else if p, ok := final[vm.Name]; ok {
		st, err = Planned(ctx, vm, p, o)
	} else {
		st, err = Failover(ctx, vm, o)
	}
	steps.step(n, vm.Name, "failover", began, err, "the standby runs as the VM, on its mapped networks")
	return st, err
}
