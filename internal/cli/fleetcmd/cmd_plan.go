package fleetcmd

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

func (a *app) cmdPlan() *cobra.Command {
	var in api.PlanPolicyInput
	var window time.Duration
	cmd := &cobra.Command{
		Use:   "plan POLICY",
		Short: "predict a policy's backup window, name its bottleneck, and try what-ifs",
		Long: command.Manual(`Predict how long a run of the policy will take, and why, without running it.
The planner simulates the run on a virtual clock with the engine's own
limits (the same slot pools, queue order and rule for starting what fits):
each VM takes its snapshot, opens its disks, reads its bytes at the rate
of the slowest device on its path, and releases its snapshot. The costs
and bytes per VM come from the policy's recorded runs in the catalog, the
device and pipeline rates from `+"`coffer bench`"+`; what was assumed where
nothing was recorded is listed. The run is simulated --runs times over the
recorded variance, which gives a P50 and a P90 and the chance to end
within the window (--window, or the gap between the schedule's next two
runs). That P90 carries only the spread of the recorded costs; the
planner's record of real runs (`+"`coffer plan accuracy`"+`: measured time ÷
P50) widens it to what the runs did, machine drift included: the P90 is
the larger of the simulation's and P50 × the record's factor (the larger
of the ratios' 90th percentile and a Student-t bound of one more run's),
from the policy's last 20 runs with a prediction, or the catalog's last
40 when the policy has fewer than 5. The plan says which was used.

The critical path is the chain of VMs, each started by the end of the one
before, that ends with the last: what they waited for and what their time
went to name the bottleneck. The seed documents' sizing rules are
checked (at most 8 snapshots per datastore, 4 streams per controller
group, 4:1 multiplexing, VMs per volume within queue depth ÷ active
commands). With three or more recorded runs at different concurrencies,
a Universal Scalability Law fit recommends limits.tasks and warns past
its knee.

Capacity: what the retention holds in the repository once it drops
points as fast as the schedule makes them, and the growth until then.
Per VM, the oldest kept point stores its used bytes × reduction, and
each later kept point its change since the kept point before (the bytes
a run adds × the runs between them, at most a whole rewrite) ×
reduction, whatever the runs' modes: the repository stores each chunk
once. The kept points come from the retention's own rules over the
schedule's runs on a calendar. The repository's other policies are
forecast too, and their growth from now is set against the store's free
space (a directory's file system, or maintenance capacity for an object
store) for the date it fills.

Each --what-if is predicted beside the configuration: tasks=N,
per-datastore=N, per-host=N, group:NAME=N, streams=N or streams=+N (the
repository's write streams), multiplexing=N, add-vms=N (copies of the
selected VMs), move=GLOB:DATASTORE.`,
			`A table of the scenarios (P50, P90, chance within the window, bottleneck),
then what the P90 carries, then per scenario its critical path, busiest resources and rule
violations, then the assumptions, measurements and concurrency advice,
then the capacity forecast.
--json: {policy, mode, vms, window_seconds, window, scenarios: [{name,
runs, p50_seconds, p90_seconds, simulated_p90_seconds, in_window,
bottleneck, critical_path_vms, waited_on, work, busy, violations}],
p90_basis, record: {scope, runs, median, empirical_90, bound_90,
factor}, assumptions, measurements,
concurrency, capacity: {retention, schedule, runs_per_day, used_bytes,
change_per_run_bytes, reduction, steady_at, peak_bytes, low_bytes,
now_bytes, growth_per_day_bytes, growth_per_month_bytes, curve, notes,
assumptions, repository: {name, policies, peak_bytes, free_bytes,
capacity, full_at, full}}}.`,
			`coffer plan nightly
coffer plan nightly --what-if tasks=64 --what-if streams=+2 --what-if add-vms=200
coffer plan nightly --mode full --window 8h --json
coffer plan accuracy nightly     # the predictions recorded as runs started, beside what happened`,
			"0; 2 for an unknown policy, a bad what-if or bad flags."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.Policy, in.WindowSeconds = args[0], window.Seconds()
			doc, err := command.RunOp[*api.Plan](cmd.Context(), a.App, "plan-policy", &in)
			if doc == nil {
				return err
			}
			return a.Emit(doc, err, func() { a.printPlan(doc) })
		},
	}
	f := cmd.Flags()
	f.StringArrayVar(&in.WhatIf, "what-if", nil, "a variation to predict beside the configuration, KEY=VALUE (repeatable)")
	f.StringVar(&in.Mode, "mode", "", "the run to plan: full, incremental or differential (default: the policy's mode)")
	f.DurationVar(&window, "window", 0, "the time the run must end within (default: the gap between the schedule's next two runs)")
	f.IntVar(&in.Runs, "runs", 0, "Monte Carlo runs (default 100, fewer for fleets over 2,000 VMs, down to 20 at 10,000)")
	f.IntVar(&in.Jobs, "jobs", 20, "recorded runs of the policy to learn from")
	f.IntVar(&in.QueueDepth, "queue-depth", 0, "every datastore's queue depth, for the VMs-per-volume rule")
	f.Float64Var(&in.CommandsPerVM, "commands-per-vm", 0, "active commands per VM, for the VMs-per-volume rule")
	cmd.AddCommand(a.cmdPlanAccuracy())
	return command.RemoteToo(command.Op(cmd, "plan-policy"))
}

func (a *app) printPlan(doc *api.Plan) {
	window := "no window"
	if doc.WindowSeconds > 0 {
		window = fmt.Sprintf("window %s (%s)", secs(doc.WindowSeconds), doc.Window)
	}
	a.Printf("policy %s: %s run of %d VMs; %s\n\n", doc.Policy, doc.Mode, doc.VMs, window)
	if a.Quiet || a.JSON {
		return
	}
	tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tP50\tP90\tIN WINDOW\tKEPT AT PEAK\tBOTTLENECK")
	for _, s := range doc.Scenarios {
		in := "-"
		if doc.WindowSeconds > 0 {
			in = fmt.Sprintf("%.0f%%", 100*s.InWindow)
		}
		kept := "-"
		if s.Capacity.Error == "" {
			kept = command.HumanBytes(s.Capacity.PeakBytes)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, secs(s.P50Seconds), secs(s.P90Seconds), in, kept, s.Bottleneck)
	}
	tw.Flush()
	a.Printf("\n%s\n", doc.P90Basis)
	for _, s := range doc.Scenarios {
		a.Printf("\n%s (%d runs):\n", s.Name, s.Runs)
		a.Printf("  critical path: %d VMs; waited on %s\n", s.CriticalPathVMs, sharesText(s.WaitedOn))
		a.Printf("  its time went to %s\n", sharesText(s.Work))
		for _, b := range s.Busy {
			a.Printf("  busy: %s (%s, %s) %.0f%% of the run, longest from %s to %s\n", b.Resource, b.Kind, capacityText(b), 100*b.Share,
				secs(b.FromSeconds), secs(b.ToSeconds))
		}
		for _, v := range s.Violations {
			a.Printf("  rule: %s\n", v)
		}
		if c := s.Capacity; c.Error == "" {
			a.Printf("  capacity: %d VMs keep %s at the peak (the repository %s); %s\n", c.VMs,
				command.HumanBytes(c.PeakBytes), command.HumanBytes(c.RepositoryPeakBytes), c.Full)
		}
	}
	a.Printf("\nassumptions:\n")
	for _, s := range doc.Assumptions {
		a.Printf("  - %s\n", s)
	}
	if len(doc.Assumptions) == 0 {
		a.Printf("  none: every figure was recorded or measured\n")
	}
	a.Printf("measurements:\n")
	for _, s := range doc.Measurements {
		a.Printf("  - %s\n", s)
	}
	if len(doc.Measurements) == 0 {
		a.Printf("  none (`coffer bench device`, `coffer bench pipeline`)\n")
	}
	if c := doc.Concurrency; c != nil {
		var pts []string
		for _, p := range c.Points {
			pts = append(pts, fmt.Sprintf("%d: %.2f VMs/s", p.Concurrency, p.VMsPerSecond))
		}
		a.Printf("concurrency (recorded runs %s): σ %.3f κ %.5f; ", strings.Join(pts, ", "), c.Sigma, c.Kappa)
		if c.Recommended > 0 {
			a.Printf("recommended limits.tasks %d (configured %d)\n", c.Recommended, c.Configured)
		} else {
			a.Printf("linear so far: no limit seen\n")
		}
		if c.Warning != "" {
			a.Printf("  warning: %s\n", c.Warning)
		}
	}
	a.printCapacity(doc)
}

// secs shows a predicted time to the precision that matters at its size.
func secs(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < 10*time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func sharesText(ss []api.PlanShare) string {
	var out []string
	for i, s := range ss {
		if i == 4 {
			out = append(out, "…")
			break
		}
		out = append(out, fmt.Sprintf("%s %.0f%%", s.What, 100*s.Share))
	}
	if len(out) == 0 {
		return "nothing"
	}
	return strings.Join(out, "; ")
}

func capacityText(b api.PlanBusy) string {
	if b.Kind == "bandwidth" {
		return fmt.Sprintf("%.0f MB/s", b.Capacity/1e6)
	}
	return fmt.Sprintf("%.0f slots", b.Capacity)
}
