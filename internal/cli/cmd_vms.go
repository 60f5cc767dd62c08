package cli

import (
	"fmt"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/apiclient"
	"github.com/coffer-backup/coffer/internal/service"
)

func (a *app) cmdVMs() *cobra.Command {
	var in service.VMsInput
	cmd := &cobra.Command{
		Use:   "vms",
		Short: "list the VMs of the configured connections, their policies and last backup",
		Long: manual(`List every VM the configured hypervisor connections see, live, with the
policies that select it and its last backup point from the catalog. A VM
is protected (covered) when a policy selects it and it has a backup point.
Without a catalog the last backups are left out.`,
			`A table: CONNECTION, VM, HOST, DATASTORES, SIZE, AGENT, POLICIES, LAST
BACKUP, AGE, PROTECTED; connections whose inventory failed on stderr.
--json: {vms: [{connection, vm, vm_id, host, datastores, tags,
power_state, guest_agent, provisioned_bytes, policies, last_point_id,
last_backup, last_mode, age_seconds, covered}], errors: [{connection,
error}]}.`,
			`coffer vms
coffer vms --connection lab --json | jq '.vms[] | select(.covered | not) | .vm'`,
			"0; 6 when some connection's inventory failed (the others are listed); 2 without connections."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			inv, err := callOp(cmd.Context(), a, apiclient.Request{Op: "list-vms", Query: url.Values{"connection": in.Connections}},
				func(s *service.Service) (*api.Inventory, error) { return s.VMs(cmd.Context(), in) })
			if inv == nil {
				return err
			}
			return a.emit(inv, err, func() {
				tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "CONNECTION\tVM\tHOST\tDATASTORES\tSIZE\tAGENT\tPOLICIES\tLAST BACKUP\tAGE\tPROTECTED")
				for _, d := range inv.VMs {
					lastBackup, age := "-", "-"
					if !d.LastBackup.IsZero() {
						lastBackup = d.LastBackup.Local().Format("2006-01-02 15:04") + " " + d.LastMode
						age = (time.Duration(d.AgeSeconds) * time.Second).Round(time.Minute).String()
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Connection, d.VM, dash(d.Host), dash(strings.Join(d.Datastores, ",")),
						humanBytes(d.ProvisionedBytes), yesNo(d.GuestAgent), dash(strings.Join(d.Policies, ",")), lastBackup, age, yesNo(d.Covered))
				}
				_ = tw.Flush()
			})
		},
	}
	cmd.Flags().StringSliceVar(&in.Connections, "connection", nil, "only these connections (repeatable)")
	return remoteToo(op(cmd, "list-vms"))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
