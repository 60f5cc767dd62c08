package workercmd

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

func (a *app) cmdWorkers() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workers",
		Short: "list the fleet's workers: state, slots, reach, last heartbeat",
		Long: command.Manual(`List the workers registered in the catalog: the coffer worker processes that
run the servers' operations on hypervisor hosts and proxies. A worker is
starting, ready, draining (it takes no new work and stops once its running
work has finished) or lost (no heartbeat for the dead interval). With --server the server's catalog is read.`,
			`A table: name, state, host, slots in use of slots, version and protocol,
the last heartbeat's age, whether it has a token of its own (none, active,
revoked; never the token) and its reach. --json: the list of workers.`,
			`coffer workers
coffer workers --server https://backup.example:8443 --json`,
			"0."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ws, err := command.RunOp[[]api.Worker](cmd.Context(), a.App, "list-workers", &api.ListWorkersInput{})
			if err != nil {
				return err
			}
			return a.Emit(ws, nil, func() { a.printWorkers(ws) })
		},
	}
	cmd.AddCommand(a.cmdWorkersDrain(), a.cmdWorkersToken())
	return command.RemoteToo(command.Op(cmd, "list-workers"))
}

func (a *app) printWorkers(ws []api.Worker) {
	if len(ws) == 0 {
		a.Printf("no workers registered\n")
		return
	}
	tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tHOST\tSLOTS\tVERSION\tHEARTBEAT\tTOKEN\tREACH")
	for _, w := range ws {
		age := command.Seconds(w.AgeSeconds).Round(100 * time.Millisecond)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s (protocol %d)\t%s ago\t%s\t%s\n", w.Name, w.State, command.Dash(w.Host),
			w.SlotsInUse, w.Slots, command.Dash(w.Version), w.Protocol, age, w.Credential, command.Dash(reach(w.Reach)))
	}
	_ = tw.Flush()
}

// reach is a worker's reach on one line.
func reach(r api.WorkerReach) string {
	var parts []string
	for _, p := range []struct {
		what  string
		names []string
	}{{"connections", r.Connections}, {"hosts", r.Hosts}, {"datastores", r.Datastores},
		{"libraries", r.Libraries}, {"repositories", r.Repositories}} {
		if len(p.names) > 0 {
			parts = append(parts, p.what+" "+strings.Join(p.names, ","))
		}
	}
	if r.CanBoot {
		parts = append(parts, "can boot")
	}
	return strings.Join(parts, "; ")
}

func (a *app) cmdWorkersDrain() *cobra.Command {
	var in api.DrainWorkerInput
	cmd := &cobra.Command{
		Use:   "drain NAME",
		Short: "drain a worker: no new work, stop once its running work has finished",
		Long: command.Manual(`Mark a worker draining: the servers grant it no new work, and the worker,
seeing it with its next heartbeat, lets its running work finish, then
deregisters and exits. SIGTERM to the worker process does the same. A lost
worker cannot be drained.`,
			`"worker NAME draining". --json: the worker.`,
			`coffer workers drain kvm7`,
			"0; 7 when there is no such worker; 2 when it was declared lost."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.Worker = args[0]
			w, err := command.RunOp[api.Worker](cmd.Context(), a.App, "drain-worker", &in)
			if err != nil {
				return err
			}
			return a.Emit(w, nil, func() { a.Printf("worker %s %s\n", w.Name, w.State) })
		},
	}
	return command.RemoteToo(command.Op(cmd, "drain-worker"))
}
