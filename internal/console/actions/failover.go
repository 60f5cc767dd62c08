package actions

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
)

// Failover plans (as `coffer failover`): each plan of the configuration
// with its groups, VMs and probes, the state of its standbys, and its
// newest runs with each step's time and each probe's result, read back
// from the runs' jobs (failover-plan-runs: the API and `coffer failover
// runs` show the same); each run links to its task, whose page has the
// whole log. A caller who holds Sys.Failover on a plan gets its four
// operations, each behind a confirmation, started as a task the browser
// follows; any other caller sees no action (the API would refuse it).

type failoverPlanView struct {
	Name   string
	Groups []failoverGroupView
	Runs   api.FailoverPlanRuns
}

type failoverGroupView struct {
	N              int
	VMs            []failoverVMView
	Probes         []string
	Delay, Timeout string
}

type failoverVMView struct {
	Name, Address string
	State         api.FailoverStandby
}

// failoverPlans lists the plans with their runs and, to a caller who may
// run them, their actions.
func failoverPlans(p Page) {
	var objs []api.ConfigObject
	if err := p.Call("list-failover-plans", nil, nil, nil, &objs); err != nil {
		p.Fail(err)
		return
	}
	var v []failoverPlanView
	for _, o := range objs {
		if o.Overridden {
			continue
		}
		plan := failoverPlanView{Name: o.Name}
		if err := p.Call("failover-plan-runs", map[string]string{"name": o.Name}, nil, nil, &plan.Runs); err != nil {
			p.Fail(err)
			return
		}
		plan.Groups = failoverGroups(o.Spec, plan.Runs.Standbys)
		v = append(v, plan)
	}
	p.Show("failover", "Failover plans", "restore", v)
}

// failoverGroups reads a plan's groups out of its object's spec (the
// keys of the configuration file), with each VM's standby state.
func failoverGroups(spec map[string]any, standbys []api.FailoverStandby) []failoverGroupView {
	state := map[string]api.FailoverStandby{}
	for _, sb := range standbys {
		state[sb.VM] = sb
	}
	groups, _ := spec["groups"].([]any)
	var out []failoverGroupView
	for i, g := range groups {
		m, _ := g.(map[string]any)
		gv := failoverGroupView{N: i + 1, Delay: text(m["delay"]), Timeout: text(m["probe-timeout"])}
		probes, _ := m["probes"].([]any)
		for _, pr := range probes {
			gv.Probes = append(gv.Probes, text(pr))
		}
		vms, _ := m["vms"].([]any)
		for _, vm := range vms {
			vmm, _ := vm.(map[string]any)
			name := text(vmm["name"])
			gv.VMs = append(gv.VMs, failoverVMView{Name: name, Address: text(vmm["address"]), State: state[name]})
		}
		out = append(out, gv)
	}
	return out
}

// text is a spec's value as the page shows it ("" for none, and for a
// zero duration: no delay).
func text(v any) string {
	if v == nil {
		return ""
	}
	s := fmt.Sprint(v)
	if s == "0s" || s == "0" {
		return ""
	}
	return s
}

// failoverActions are the operations a plan's form starts, by the last
// element of the action's path, with what the task's success says.
var failoverActions = map[string]struct{ op, done string }{
	"test":     {"test-failover", "The test failover passed."},
	"failover": {"failover", "The failover ran."},
	"planned":  {"planned-failover", "The planned failover ran."},
	"failback": {"failback", "The failback ran."},
}

// startFailover starts one operation of a plan once the form confirms it.
func startFailover(action string) func(Page) {
	a := failoverActions[action]
	return func(p Page) {
		f := p.Form()
		if f.Get("confirm") != "yes" {
			refuse(p, "confirm the "+strings.ReplaceAll(a.op, "-", " ")+" first: tick the box above the buttons")
			return
		}
		q := url.Values{}
		if vm := strings.TrimSpace(f.Get("vm")); vm != "" {
			q.Set("vm", vm)
		}
		if seq := strings.TrimSpace(f.Get("seq")); seq != "" && (a.op == "test-failover" || a.op == "failover") {
			q.Set("seq", seq)
		}
		if to := strings.TrimSpace(f.Get("to")); to != "" && a.op == "failback" {
			q.Set("to", to)
		}
		id, err := p.StartTask(a.op, map[string]string{"name": p.Value("name")}, q, nil, nil)
		p.Started(id, err, a.done)
	}
}
