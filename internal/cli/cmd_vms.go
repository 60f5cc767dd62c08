package cli

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
)

func (a *app) cmdVMs() *cobra.Command {
	var only []string
	cmd := &cobra.Command{
		Use:   "vms",
		Short: "list the VMs of the configured connections, their policies and last backup",
		Long: `List every VM the configured hypervisor connections see, live, with the
policies that select it and its last backup point from the catalog. A VM
is protected when a policy selects it and it has a backup point.

EXAMPLES
    coffer vms
    coffer vms --connection lab --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runVMs(cmd.Context(), only) },
	}
	cmd.Flags().StringSliceVar(&only, "connection", nil, "only these connections (repeatable)")
	return cmd
}

type vmDoc struct {
	Connection string            `json:"connection"`
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Host       string            `json:"host,omitempty"`
	Datastores []string          `json:"datastores,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
	Power      string            `json:"power_state,omitempty"`
	GuestAgent bool              `json:"guest_agent"` // qemu-guest-agent or VMware Tools running: quiesced backups possible
	Bytes      int64             `json:"provisioned_bytes"`
	Policies   []string          `json:"policies"`
	LastBackup time.Time         `json:"last_backup,omitzero"`
	LastMode   string            `json:"last_mode,omitempty"`
	AgeSeconds float64           `json:"age_seconds,omitempty"`
	Protected  bool              `json:"protected"`
}

func (a *app) runVMs(ctx context.Context, only []string) error {
	cfg, err := a.engineConfig()
	if err != nil {
		return err
	}
	names := only
	if len(names) == 0 {
		for _, c := range cfg.Connections {
			names = append(names, c.Name)
		}
	}
	if len(names) == 0 {
		return usagef("no connections configured (add a connections: section to the configuration file)")
	}
	conns, _, err := a.openConnectors(ctx, cfg, names)
	if err != nil {
		return err
	}
	last := map[string]catalog.BackupPoint{}
	cat, err := a.openCatalog(ctx)
	switch {
	case err != nil:
		// The inventory is still useful without the last-backup column.
		a.log.Warn("catalog unavailable: last backups are not shown", "err", err)
	default:
		defer cat.Close()
		points, err := cat.ListBackupPoints(ctx, catalog.BackupPointFilter{})
		if err != nil {
			return err
		}
		for _, p := range points {
			k := p.Connection + "\x00" + p.VMID
			if p.Time.After(last[k].Time) {
				last[k] = p
			}
		}
	}
	var docs []vmDoc
	var failed []string
	for _, name := range names {
		vms, err := conns[name].Inventory(ctx)
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		for _, vm := range vms {
			d := vmDoc{Connection: name, ID: vm.ID, Name: vm.Name, Host: vm.Host, Datastores: vm.Datastores, Tags: vm.Tags,
				Power: vm.PowerState, GuestAgent: vm.GuestAgent, Bytes: vm.ProvisionedBytes(), Policies: policiesSelecting(cfg, name, vm)}
			if p, ok := last[name+"\x00"+vm.ID]; ok {
				d.LastBackup, d.LastMode, d.AgeSeconds = p.Time, p.Mode, time.Since(p.Time).Seconds()
			}
			d.Protected = len(d.Policies) > 0 && !d.LastBackup.IsZero()
			docs = append(docs, d)
		}
	}
	sort.SliceStable(docs, func(i, j int) bool { return docs[i].Connection < docs[j].Connection })
	if a.jsonOut {
		if err := a.printJSON(docs); err != nil {
			return err
		}
	} else {
		tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "CONNECTION\tVM\tHOST\tDATASTORES\tSIZE\tAGENT\tPOLICIES\tLAST BACKUP\tAGE\tPROTECTED")
		for _, d := range docs {
			lastBackup, age := "-", "-"
			if !d.LastBackup.IsZero() {
				lastBackup = d.LastBackup.Local().Format("2006-01-02 15:04") + " " + d.LastMode
				age = (time.Duration(d.AgeSeconds) * time.Second).Round(time.Minute).String()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", d.Connection, d.Name, dash(d.Host), dash(strings.Join(d.Datastores, ",")),
				humanBytes(d.Bytes), yesNo(d.GuestAgent), dash(strings.Join(d.Policies, ",")), lastBackup, age, yesNo(d.Protected))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		msg := "inventory failed: " + strings.Join(failed, "; ")
		if !a.jsonOut {
			fmt.Fprintf(a.stderr, "coffer: %s\n", msg)
		}
		return partialError{msg}
	}
	return nil
}

// policiesSelecting names the policies that back up vm of a connection.
func policiesSelecting(cfg *policy.Config, conn string, vm hypervisor.VM) []string {
	out := []string{}
	for _, p := range cfg.Policies {
		for _, c := range p.ConnectionNames() {
			if c == conn && p.Selects(vm) {
				out = append(out, p.Name)
				break
			}
		}
	}
	return out
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
