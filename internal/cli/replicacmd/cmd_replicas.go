package replicacmd

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

func (a *app) cmdReplicas() *cobra.Command {
	var in api.ListReplicasInput
	cmd := &cobra.Command{
		Use:   "replicas",
		Short: "list the standbys replications keep on DR hosts, with their lag (RPO)",
		Long: command.Manual(`List the standby VMs that the replications of the configuration (the
replications section, or replication objects) keep on their DR hosts, as
the catalog recorded their last runs: where each is, the instant of the
backup point its newest restore point equals, its lag behind now (the data
a failover now would lose) against the replication's rpo, its restore
points and its last run's error. With --server the server's catalog is read.`,
			`A table: replication, VM, host, newest point's instant, lag, rpo, points
kept, state (ok, LAGGING, or the last error). --json: the list of replicas,
each with its points.`,
			`coffer replicas
coffer replicas --replication web-dr --json`,
			"0."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rs, err := command.RunOp[[]api.Replica](cmd.Context(), a.App, "list-replicas", &in)
			if err != nil {
				return err
			}
			return a.Emit(rs, nil, func() { a.printReplicas(rs) })
		},
	}
	cmd.Flags().StringVar(&in.Replication, "replication", "", "only this replication's standbys")
	cmd.Flags().StringVar(&in.VM, "vm", "", "only this VM's standbys")
	cmd.AddCommand(a.cmdReplicasRun(), a.cmdReplicasPoints())
	return command.RemoteToo(command.Op(cmd, "list-replicas"))
}

func (a *app) printReplicas(rs []api.Replica) {
	if len(rs) == 0 {
		a.Printf("no standbys recorded: run a replication (coffer replicas run NAME)\n")
		return
	}
	tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "REPLICATION\tVM\tHOST\tNEWEST\tLAG\tRPO\tPOINTS\tSTATE")
	for _, r := range rs {
		newest, lag := "-", "-"
		if !r.SourceTime.IsZero() {
			newest = r.SourceTime.Local().Format(time.DateTime)
			lag = command.Seconds(r.LagSeconds).Round(time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", r.Replication, r.VM, command.Dash(r.Host), newest, lag,
			command.Seconds(r.RPOSeconds), len(r.Points), state(r))
	}
	_ = tw.Flush()
}

// state is how a standby stands: its last error, or whether it lags
// beyond its rpo.
func state(r api.Replica) string {
	switch {
	case r.LastError != "":
		return "FAILED: " + r.LastError
	case r.Lagging:
		return "LAGGING"
	}
	return "ok"
}

func (a *app) cmdReplicasRun() *cobra.Command {
	var in api.RunReplicationInput
	cmd := &cobra.Command{
		Use:   "run NAME",
		Short: "bring a replication's standbys to their VMs' newest backup points",
		Long: command.Manual(`Run replication NAME now: each standby it keeps is brought to its VM's
newest backup point in the replication's repository, reading from the
repository only the chunks that changed since the standby's previous point
and writing them into a new qcow2 overlay, committed whole or not at all.
The standby keeps the replication's newest keep points. With a server that
has workers, the run goes to the worker of the DR host (the replication's
connection's host); without one it runs in this process.`,
			`A table per VM: the backup point, whether it was up to date, the
spans written, the bytes read from the repository, the points kept.
--json: the run's document.`,
			`coffer replicas run web-dr
coffer replicas run web-dr --vm web-01 --json`,
			"0; 1 when a VM's standby failed (the others still ran); 7 for an unknown replication."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.Name = args[0]
			run, err := command.RunOp[*api.ReplicationRun](cmd.Context(), a.App, "run-replication", &in)
			if run == nil || err != nil && !vmFailed(run) {
				// A run that failed as a whole (no VM to bring up to
				// date, no worker...) has no VM to show the error
				// against: it is reported as every command's error is.
				return err
			}
			return a.Emit(run, err, func() { a.printRun(run) })
		},
	}
	cmd.Flags().StringVar(&in.VM, "vm", "", "only this VM's standby")
	cmd.Flags().StringVar(&in.Worker, "worker", "", "run on this worker of the fleet (default: the DR host's)")
	return command.RemoteToo(command.Op(cmd, "run-replication"))
}

// vmFailed reports whether the run's document names a VM whose standby
// failed, so that it describes the run's error itself.
func vmFailed(run *api.ReplicationRun) bool {
	for _, vm := range run.VMs {
		if vm.Error != "" {
			return true
		}
	}
	return false
}

func (a *app) printRun(run *api.ReplicationRun) {
	tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VM\tPOINT\tSPANS\tREAD\tPOINTS\tRESULT")
	for _, vm := range run.VMs {
		result := "replicated"
		switch {
		case vm.Error != "":
			result = "FAILED: " + vm.Error
		case vm.UpToDate:
			result = "up to date"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\n", vm.VM, command.Short(vm.BackupPoint), vm.Spans, command.HumanBytes(vm.BytesRead), len(vm.Points), result)
	}
	_ = tw.Flush()
}

func (a *app) cmdReplicasPoints() *cobra.Command {
	var in api.ListReplicasInput
	cmd := &cobra.Command{
		Use:   "points REPLICATION VM",
		Short: "list the restore points a standby keeps, oldest first",
		Long: command.Manual(`List the restore points the standby of VM kept by REPLICATION holds on
its DR host, oldest first: each equals a backup point of the VM, and
failover may start the standby from any of them (an earlier one, for a
VM whose newest state is damaged).`,
			`A table: sequence number, backup point, its instant, when it was
replicated, bytes read and written by its run. --json: the points.`,
			`coffer replicas points web-dr web-01`,
			"0; 1 when the replication keeps no standby of the VM."),
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.Replication, in.VM = args[0], args[1]
			rs, err := command.RunOp[[]api.Replica](cmd.Context(), a.App, "list-replicas", &in)
			if err != nil {
				return err
			}
			if len(rs) == 0 {
				return fmt.Errorf("replication %s keeps no standby of %s", in.Replication, in.VM)
			}
			ps := rs[0].Points
			return a.Emit(ps, nil, func() {
				tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "SEQ\tBACKUP POINT\tINSTANT\tREPLICATED\tREAD\tWRITTEN")
				for _, p := range ps {
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", p.Seq, command.Short(p.BackupPoint), p.SourceTime.Local().Format(time.DateTime),
						p.ReplicatedAt.Local().Format(time.DateTime), command.HumanBytes(p.BytesRead), command.HumanBytes(p.BytesWritten))
				}
				_ = tw.Flush()
			})
		},
	}
	return command.RemoteToo(command.Op(cmd, "list-replicas"))
}
