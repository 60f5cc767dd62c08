package fleetcmd

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/service/fleetops"
)

func (a *app) cmdVMs() *cobra.Command {
	var in api.ListVMsInput
	cmd := &cobra.Command{
		Use:   "vms",
		Short: "list the VMs of the configured connections, their policies and last backup",
		Long: command.Manual(`List the VMs of the configured hypervisor connections with the policies
that select them and their last backup point from the catalog. A VM is
protected (covered) when a policy selects it and it has a backup point.

The VMs come from the catalog's inventory. Through a server (--server or
COFFER_SERVER) it is the one the server keeps: it lists every connection
in the background every maintenance.inventory-every (5m), and coffer vms
refresh CONNECTION lists one now. Without a server this command lists
the connections live first and stores what it found. A connection whose
last refresh failed is named on stderr with its error, and its VMs are
those of its last success; a VM marked busy (QEMU: a backup held its
monitor) shows its last known state.`,
			`A table: CONNECTION, VM, HOST, DATASTORES, SIZE, AGENT, POLICIES, LAST
BACKUP, AGE, PROTECTED (busy VMs are marked "(busy)"); the age of each
connection's inventory and the connections whose inventory failed on
stderr.
--json: {vms: [{connection, vm, vm_id, host, datastores, tags,
power_state, guest_agent, change_tracking, disks: [{key, name,
size_bytes, datastore, path, format}], provisioned_bytes, policies,
last_point_id, last_backup, last_mode, age_seconds, covered, protection,
rpo_seconds, busy}], connections: [{connection, refreshed_at, age_seconds,
attempted_at, error, vms}], errors: [{connection, error}], counts: {total,
matched} (with --order attention or --attention)}.`,
			`coffer vms
coffer vms --protection unprotected --name web
coffer vms --order attention --attention
coffer vms --connection lab --json | jq '.vms[] | select(.covered | not) | .vm'`,
			"0; 6 when some connection's inventory is missing or its last refresh failed (the others are listed); 2 without connections."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.refreshInventoriesHere(cmd.Context(), in.Connections); err != nil {
				return err
			}
			inv, err := a.wholeInventory(cmd.Context(), in)
			if inv == nil {
				return err
			}
			return a.Emit(inv, err, func() {
				tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "CONNECTION\tVM\tHOST\tDATASTORES\tSIZE\tAGENT\tPOLICIES\tLAST BACKUP\tAGE\tPROTECTED")
				for _, d := range inv.VMs {
					lastBackup, age := "-", "-"
					if !d.LastBackup.IsZero() {
						lastBackup = d.LastBackup.Local().Format("2006-01-02 15:04") + " " + d.LastMode
						age = (time.Duration(d.AgeSeconds) * time.Second).Round(time.Minute).String()
					}
					name := d.VM
					if d.Busy {
						name += " (busy)"
					}
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Connection, name, command.Dash(d.Host), command.Dash(strings.Join(d.Datastores, ",")),
						command.HumanBytes(d.ProvisionedBytes), command.YesNo(d.GuestAgent), command.Dash(strings.Join(d.Policies, ",")), lastBackup, age, command.YesNo(d.Covered))
				}
				_ = tw.Flush()
				for _, c := range inv.Connections {
					if !c.RefreshedAt.IsZero() {
						fmt.Fprintf(a.Stderr, "%s: %d VMs listed %s ago\n", c.Connection, c.VMs,
							(time.Duration(c.AgeSeconds) * time.Second).Round(time.Second))
					}
				}
			})
		},
	}
	cmd.Flags().StringSliceVar(&in.Connections, "connection", nil, "only these connections (repeatable)")
	cmd.Flags().StringVar(&in.Protection, "protection", "", "only protected VMs (a policy selects them) or unprotected ones")
	cmd.Flags().StringVar(&in.Name, "name", "", "only VMs whose name contains this")
	cmd.Flags().StringVar(&in.Search, "search", "", "only VMs whose name or connection contains this")
	cmd.Flags().StringVar(&in.Order, "order", "", "attention: the VMs that need a look first (no policy, no point, outside their RPO)")
	cmd.Flags().BoolVar(&in.Attention, "attention", false, "only the VMs that need a look (not within their RPO)")
	cmd.AddCommand(a.cmdVMsRefresh(), a.cmdVMsProtection())
	return command.RemoteToo(command.Op(cmd, "list-vms"))
}

// refreshInventoriesHere lists the connections live first when no server
// is configured: without one, nobody refreshes the inventory in the
// background (a server's operations read the inventory it keeps).
func (a *app) refreshInventoriesHere(ctx context.Context, connections []string) error {
	if a.Remote != nil {
		return nil
	}
	s, err := a.Service()
	if err != nil {
		return err
	}
	return fleetops.Ops{Service: s}.RefreshInventories(ctx, connections)
}

// wholeInventory reads every page of the inventory, here or through the
// server: the first page's counts and connections, every page's VMs, and
// the last page's error.
func (a *app) wholeInventory(ctx context.Context, in api.ListVMsInput) (*api.Inventory, error) {
	in.Limit = command.MaxPage
	var all *api.Inventory
	for {
		page, next, err := command.RunPage[*api.Inventory](ctx, a.App, "list-vms", &in)
		if page == nil {
			return all, err
		}
		if all == nil {
			all = page
		} else {
			all.VMs = append(all.VMs, page.VMs...)
		}
		if next == "" {
			return all, err
		}
		in.After = next
	}
}

func (a *app) cmdVMsRefresh() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "refresh CONNECTION",
		Short: "list a connection's VMs into the inventory now",
		Long: command.Manual(`List the VMs of a connection now and store them as its inventory, as a
task (kind inventory-refresh): VMs no longer listed leave the inventory,
a busy VM (QEMU: a backup holds its monitor) keeps its last known state.
A failed listing leaves the inventory as it was, with the error beside
it (coffer vms shows it).`,
			`connection, VMs listed and busy, and when.
--json: {connection, refreshed_at, vms, busy}.`,
			`coffer vms refresh vcenter`,
			"0; 1 when the connection could not be listed; 7 for an unknown connection."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := command.RunOp[*api.InventoryRefresh](cmd.Context(), a.App, "refresh-inventory", &api.RefreshInventoryInput{Connection: args[0]})
			if r == nil {
				return err
			}
			return a.Emit(r, err, func() {
				fmt.Fprintf(a.Stdout, "%s: %d VMs listed (%d busy) at %s\n", r.Connection, r.VMs, r.Busy, r.RefreshedAt.Local().Format(time.RFC3339))
			})
		},
	}
	return command.RemoteToo(command.Op(cmd, "refresh-inventory"))
}
