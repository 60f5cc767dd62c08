package fleetcmd

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

func (a *app) cmdVMsProtection() *cobra.Command {
	var in api.ProtectionSummaryInput
	cmd := &cobra.Command{
		Use:   "protection",
		Short: "count the VMs within their RPO, outside it, without a point and selected by no policy",
		Long: command.Manual(`Count the VMs of the inventory by how each stands against its recovery
point objective: the strictest rpo of the policies that select it, or a
day when none sets one. The first VMs that need a look are named. This is
the web console's dashboard, computed by the service without listing the
fleet.`,
			`the counts, then the VMs that need a look (at most ten) with why.
--json: {total, within_rpo, outside_rpo, no_point, no_policy,
default_rpo_seconds, policies_with_rpo, attention: [VMs as coffer vms
--json shows them], connections, errors}.`,
			`coffer vms protection
coffer vms protection --connection lab --json`,
			"0; 6 when some connection's inventory is missing or its last refresh failed (the others are counted); 2 without connections."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.refreshInventoriesHere(cmd.Context(), in.Connections); err != nil {
				return err
			}
			sum, err := command.RunOp[*api.ProtectionSummary](cmd.Context(), a.App, "protection-summary", &in)
			if sum == nil {
				return err
			}
			return a.Emit(sum, err, func() {
				a.Printf("%d VMs: %d within their RPO, %d outside it, %d without a point, %d selected by no policy\n",
					sum.Total, sum.WithinRPO, sum.OutsideRPO, sum.NoPoint, sum.NoPolicy)
				a.Printf("rpo: %s where no policy sets one; %d policies set their own\n",
					time.Duration(sum.DefaultRPOSeconds*float64(time.Second)), sum.PoliciesWithRPO)
				for _, vm := range sum.Attention {
					fmt.Fprintf(a.Stdout, "  %s/%s: %s\n", vm.Connection, vm.VM, vm.Protection)
				}
			})
		},
	}
	cmd.Flags().StringSliceVar(&in.Connections, "connection", nil, "only these connections (repeatable)")
	return command.RemoteToo(command.Op(cmd, "protection-summary"))
}
