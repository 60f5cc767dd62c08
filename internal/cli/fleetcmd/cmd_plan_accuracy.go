package fleetcmd

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

func (a *app) cmdPlanAccuracy() *cobra.Command {
	var runs int
	cmd := &cobra.Command{
		Use:   "accuracy [POLICY]",
		Short: "set the predictions of a policy's last runs beside what happened",
		Long: command.Manual(`Every policy run is predicted as it starts (the "plan" line of its log:
P50, P90, bottleneck, from what the catalog recorded until then). This
sets each of the last --runs predictions beside the time the run took,
from its first VM's start to its last VM's end, with the error and the
bias over them and the share of runs that ended within their P90: the
planner held to its record. Without a policy, the same sums for every
policy, each over its own last runs (the console's dashboard shows them).`,
			`One line per run, newest first (job, start, VMs, P50, P90, measured,
error), then the mean absolute error, the bias (positive: runs took longer
than predicted) and the share within P90. --json: {policy, runs: [{job_id,
started, vms, p50_seconds, p90_seconds, measured_seconds, error}],
mean_abs_error, bias, within_p90}. Without a policy, one line per policy
(runs, mean absolute error, bias, within P90, the newest run's error) and
the policies with no predicted run; --json: {policies: [as above],
unpredicted: [names]}.`,
			`coffer plan accuracy nightly
coffer plan accuracy nightly --runs 50 --json
coffer plan accuracy`,
			"0; 2 for an unknown policy or bad flags."),
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				doc, err := command.RunOp[*api.PlanAccuracies](cmd.Context(), a.App, "plan-accuracies", &api.PlanAccuraciesInput{Runs: runs})
				if doc == nil {
					return err
				}
				return a.Emit(doc, err, func() { a.printAccuracies(doc) })
			}
			in := api.PlanAccuracyInput{PolicyParam: api.PolicyParam{Policy: args[0]}, Runs: runs}
			doc, err := command.RunOp[*api.PlanAccuracy](cmd.Context(), a.App, "plan-accuracy", &in)
			if doc == nil {
				return err
			}
			return a.Emit(doc, err, func() { a.printAccuracy(doc) })
		},
	}
	cmd.Flags().IntVar(&runs, "runs", 20, "the last runs to judge (of each policy)")
	return command.RemoteToo(command.Op(cmd, "plan-accuracy", "plan-accuracies"))
}

func (a *app) printAccuracy(doc *api.PlanAccuracy) {
	if len(doc.Runs) == 0 {
		a.Printf("policy %s: no run with a prediction yet (runs record one as they start)\n", doc.Policy)
		return
	}
	if a.Quiet || a.JSON {
		return
	}
	tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTARTED\tVMS\tP50\tP90\tMEASURED\tERROR")
	for _, r := range doc.Runs {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\t%s\t%+.0f%%\n", r.JobID, r.Started.Local().Format("2006-01-02 15:04"), r.VMs,
			secs(r.P50Seconds), secs(r.P90Seconds), secs(r.MeasuredSeconds), 100*r.Error)
	}
	tw.Flush()
	a.Printf("policy %s, %d runs: mean absolute error %.0f%%, bias %+.0f%%, %.0f%% within P90\n", doc.Policy, len(doc.Runs),
		100*doc.MeanAbsError, 100*doc.Bias, 100*doc.WithinP90)
}

func (a *app) printAccuracies(doc *api.PlanAccuracies) {
	if a.Quiet || a.JSON {
		return
	}
	if len(doc.Policies) == 0 && len(doc.Unpredicted) == 0 {
		a.Printf("no policy is configured: nothing to judge\n")
		return
	}
	if len(doc.Policies) > 0 {
		tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "POLICY\tRUNS\tMEAN ERROR\tBIAS\tWITHIN P90\tNEWEST")
		for _, p := range doc.Policies {
			fmt.Fprintf(tw, "%s\t%d\t%.0f%%\t%+.0f%%\t%.0f%%\t%+.0f%%\n", p.Policy, len(p.Runs), 100*p.MeanAbsError, 100*p.Bias, 100*p.WithinP90, 100*p.Runs[0].Error)
		}
		tw.Flush()
	}
	if len(doc.Unpredicted) > 0 {
		a.Printf("no run with a prediction yet: %s\n", strings.Join(doc.Unpredicted, ", "))
	}
}
