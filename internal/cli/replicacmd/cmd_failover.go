package replicacmd

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

func (a *app) cmdFailover() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "failover",
		Short: "run failover plans: test failover, failover, planned failover, failback",
		Long: command.Manual(`Failover plans (the failover-plans section, or failover-plan objects)
start the standbys of a replication as the running VMs, in ordered groups:
each group starts once the previous group's VMs passed their probes and
its delay is over. Each subcommand runs as a job with its log, and needs
the Sys.Failover privilege on /system/failover-plans/PLAN.`,
			`See each subcommand.`,
			`coffer failover test shop
coffer failover run shop --vm web-01 --seq 4
coffer failover planned shop
coffer failover failback shop`,
			"See each subcommand."),
		Args: cobra.NoArgs,
	}
	cmd.AddCommand(
		a.cmdFailoverOp("test", "test-failover", "test a plan on throw-away overlays, isolated, then discard everything",
			`Start every VM of PLAN on a new qcow2 overlay above its standby's
restore point (the newest, or --seq), each on an isolated network: QEMU's
user-mode network with restrict=on, which reaches nothing, with only the
probes' ports forwarded to this host. Groups start in order, each once the
previous one's probes and scripts passed and its delay is over. Then every
VM is stopped and every file of the test removed: the standbys are only
read and the source VMs are not touched.`),
		a.cmdFailoverOp("run", "failover", "unplanned failover: the standbys become the running VMs",
			`Fail over PLAN's VMs (or --vm's): each standby becomes the running VM,
from its newest restore point or --seq, on a writable overlay above it, on
the networks its replication mapped. The standby's record marks it failed
over first: replications refuse to write onto it until a failback. A
failover killed midway is finished by running it again (a VM whose
failover was noted is started again on the overlay it has).`),
		a.cmdFailoverOp("planned", "planned-failover", "planned failover: replicate the final points, then switch",
			`A migration without loss: shut the source VMs down and back them up a last
time (coffer backup vm), then run this. It replicates each VM's newest
backup point, checks that the standby equals exactly that point, and fails
over onto it. The failback later moves only what the DR VMs wrote.

A standby on a vSphere DR site: after the replication, coffer shuts the
source VM down itself (a guest shutdown when its VMware Tools run, else a
power-off), writes what its disks changed since that backup point onto the
standby as a final restore point, and fails over onto it.`),
		a.cmdFailoverOp("failback", "failback", "write what changed at the DR site back onto the original disks",
			`Stop PLAN's failed-over VMs (or --vm's) and write what changed at the DR
site onto the original VMs' disks, as their failover point recorded them
(the sources must not run). After a planned failover only the clusters the
DR VM wrote are written; after an unplanned one every block is compared
and the differing ones written. Then the failed-over mark is cleared and
the DR overlays removed: start the original VMs, and replication follows
them again.

A standby on a vSphere DR site: the DR VM is powered off, its disks are
compared with the original VM's (powered off, without snapshots) and the
differing blocks written onto the original; then the standby goes back to
its newest restore point, powered off, and coffer powers the original on.
--to is refused for such a plan.

With --to DIR, a failback to a new location: each VM's DR disks are
written whole (what is not zero) as new qcow2 files in DIR/VM, named
disk-KEY.qcow2, and the original disks are not touched. A file of that
name that exists is refused. Through a server, DIR is relative to its
restore directory.`),
		a.cmdFailoverRuns(),
	)
	return cmd
}

func (a *app) cmdFailoverRuns() *cobra.Command {
	var in api.FailoverRunsInput
	cmd := &cobra.Command{
		Use:   "runs PLAN",
		Short: "a plan's newest runs: each step's time and each probe's result",
		Long: command.Manual(`Show PLAN's standbys (failed over or not) and its newest runs, newest
first, as their jobs' logs recorded them: each run's kind, status and
user, each step's time and each probe's result. A run's whole log is
coffer job show JOB.`,
			`The standbys, then per run a table of its steps and probes. --json:
the document.`,
			"coffer failover runs shop\ncoffer failover runs shop --limit 1 --json",
			"0; 7 for an unknown plan."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.Name = args[0]
			runs, err := command.RunOp[*api.FailoverPlanRuns](cmd.Context(), a.App, "failover-plan-runs", &in)
			if runs == nil {
				return err
			}
			return a.Emit(runs, err, func() { a.printFailoverRuns(runs) })
		},
	}
	cmd.Flags().IntVar(&in.Limit, "limit", 0, "the most runs (default 10)")
	return command.RemoteToo(command.Op(cmd, "failover-plan-runs"))
}

func (a *app) printFailoverRuns(runs *api.FailoverPlanRuns) {
	for _, sb := range runs.Standbys {
		state := "standby"
		switch {
		case sb.Unknown != "":
			state = "unknown: " + sb.Unknown
		case sb.FailedOver:
			state = fmt.Sprintf("failed over from point %d since %s", sb.Seq, sb.Since.Format(time.RFC3339))
		}
		a.Printf("group %d  %s: %s\n", sb.Group, sb.VM, state)
	}
	for _, r := range runs.Runs {
		a.Printf("\njob %d: %s by %s, %s (%s)%s\n", r.JobID, r.Kind, command.Dash(r.User), r.Status,
			command.Seconds(r.Seconds).Round(time.Millisecond), map[bool]string{true: ": " + r.Error}[r.Error != ""])
		a.printFailover(&api.FailoverRun{Steps: r.Steps, Probes: r.Probes, Kind: r.Kind, Plan: runs.Plan, Passed: r.Status == "success", Seconds: r.Seconds})
	}
}

func (a *app) cmdFailoverOp(use, op, short, long string) *cobra.Command {
	var in api.FailoverInput
	cmd := &cobra.Command{
		Use:   use + " PLAN",
		Short: short,
		Long: command.Manual(long,
			`The steps with their times and errors, and the probes with their
results. --json: the run's document.`,
			"coffer failover "+use+" shop\ncoffer failover "+use+" shop --vm web-01 --json",
			"0; 1 when a step or a probe failed; 7 for an unknown plan."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.Name = args[0]
			run, err := command.RunOp[*api.FailoverRun](cmd.Context(), a.App, op, &in)
			if run == nil || err != nil && !failureShown(run) {
				// A run that failed as a whole (a standby another run
				// holds, a final replication that failed, no state
				// directory...) has no step to show the error against:
				// it is reported as every command's error is.
				return err
			}
			return a.Emit(run, err, func() { a.printFailover(run) })
		},
	}
	cmd.Flags().StringVar(&in.VM, "vm", "", "only this VM of the plan")
	if op == "test-failover" || op == "failover" {
		cmd.Flags().IntVar(&in.Seq, "seq", 0, "start from this restore point of the standbys (coffer replicas points); default the newest")
	}
	if op == "failback" {
		cmd.Flags().StringVar(&in.To, "to", "", "fail back to a new location: write each VM's disks whole as new files in DIR/VM (disk-KEY.qcow2), not onto the original disks")
	}
	cmd.Flags().StringVar(&in.Worker, "worker", "", "run on this worker of the fleet (default: the DR host's)")
	return command.RemoteToo(command.Op(cmd, op))
}

// failureShown reports whether the run's document shows why it failed:
// a step with an error or a probe that did not pass.
func failureShown(run *api.FailoverRun) bool {
	for _, s := range run.Steps {
		if s.Error != "" {
			return true
		}
	}
	for _, p := range run.Probes {
		if !p.Passed {
			return true
		}
	}
	return false
}

func (a *app) printFailover(run *api.FailoverRun) {
	tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tVM\tSTEP\tTIME\tRESULT")
	for _, s := range run.Steps {
		res := command.Dash(s.Detail)
		if s.Error != "" {
			res = "FAILED: " + s.Error
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", s.Group, command.Dash(s.VM), s.Name, command.Seconds(s.Seconds).Round(time.Millisecond), res)
	}
	for _, p := range run.Probes {
		res := "passed: " + p.Evidence
		if !p.Passed {
			res = "FAILED: " + p.Error
		}
		fmt.Fprintf(tw, "%d\t%s\tprobe %s\t%s\t%s\n", p.Group, p.VM, p.Probe, command.Seconds(p.Seconds).Round(time.Millisecond), res)
	}
	for _, f := range run.Failback {
		fmt.Fprintf(tw, "-\t%s\tfailback (%s)\t-\t%s written, %s read\n", f.VM, f.Mode, command.HumanBytes(f.BytesWritten), command.HumanBytes(f.BytesRead))
		for k, d := range f.Disks {
			fmt.Fprintf(tw, "-\t%s\tnew disk %s\t-\t%s\n", f.VM, k, d)
		}
	}
	_ = tw.Flush()
	a.Printf("%s of plan %s: passed %v in %s\n", run.Kind, run.Plan, run.Passed, command.Seconds(run.Seconds).Round(time.Millisecond))
}
