package configcmd

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/policy"
)

func (a *app) cmdPolicy() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "inspect backup policies",
		Long: command.Manual(`Inspect the backup policies in effect (the configuration file's and those
created through the API): whether they are valid, what each will really
do, and what a run would do now.`,
			"See the subcommands.",
			`coffer policy check
coffer policy preview nightly`,
			"That of the subcommand."),
	}
	var offline bool
	check := &cobra.Command{
		Use:   "check",
		Short: "validate connections, repositories, limits and policies, and show which VMs each policy selects",
		Long: command.Manual(`Validate the engine's configuration sections (connections and their
options, repositories, limits, resource-groups, policies, storage-snapshots,
latency-control):
unknown keys, bad globs, bad cron schedules, references to missing
connections or repositories, and what a policy asks of its connections
that they cannot do (group: datastore without a storage snapshot provider,
a snapshot mode the platform cannot take). Every problem is reported at
once. Nothing is contacted for this.

Then say what each policy will really do: warnings for settings that run
differently from how they read (as-is without a storage snapshot, quiesce
without snapshot: quiesced), and, unless --offline, after inventorying
every connection a policy uses, the VMs it selects, its next scheduled run,
and the selected VMs that will fail or degrade (running VMs under as-is,
VMs without a guest agent under quiesced). The maintenance section is
checked too, and each of its jobs is listed with its next runs (those its
window keeps from starting are marked, a verify's share of the packs and
a media copy's media set), or the policy whose runs it follows.`,
			`The counts and limits, then per policy its mode, snapshot mode,
repository, retention and schedule, the VMs it selects per connection and
its warnings. --json: {valid, connections, repositories, resource_groups,
limits, policies: [{name, mode, full_every, full_on, snapshot_mode, group,
repository, schedule, next_run, retention, lock_seconds, rpo_seconds, lock_problem,
selected: [{connection, vms_total, vms, error}], warnings: [{level,
message}]}], maintenance: [{name, kind, repository, schedule, window,
read_data_period_seconds, to, after, library, pool, next_runs: [{at,
starts, share, shares, media_set}]}]}
(selected is absent with --offline).`,
			`coffer policy check
coffer policy check --offline --json`,
			`0 for a valid configuration; 2 for any problem, or a policy asking for
immutable-for on a repository that cannot lock; 6 when an inventory
failed.`),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			doc, err := command.RunOp[*api.PolicyCheck](cmd.Context(), a.App, "check-policies", &api.CheckPoliciesInput{Offline: offline})
			if doc == nil {
				return err
			}
			return a.Emit(doc, err, func() { a.printPolicies(doc) })
		},
	}
	check.Flags().BoolVar(&offline, "offline", false, "only validate; do not contact the hypervisors")
	var runs int
	var draft string
	preview := &cobra.Command{
		Use:   "preview POLICY | --draft FILE",
		Short: "what a run of the policy would do now: the VMs it selects, its next runs, what its retention keeps",
		Long: command.Manual(`Say what running a policy would do now, changing nothing: the VMs it
selects on each of its connections (after inventorying them), its next
scheduled runs, its warnings, and what its retention would keep and
remove of the points it made so far (forget's verdict on the policy's
repository, as a dry run).

With --draft, the policy is one not saved yet: FILE ("-": standard
input) holds it as YAML or JSON, like an entry of the configuration
file's policies (what `+"`config create policy`"+` takes). It is checked
as saving it would be, and previewed as if saved (over the policy of its
name, if there is one: its points are the ones judged).`,
			`The selection per connection, the next runs, the warnings, then per VM
the points retention keeps (with why) and removes. --json: {policy,
selected, next_runs, retention, warnings, sources: [{vm, keep, remove,
locked}]}.`,
			`coffer policy preview nightly
coffer policy preview nightly --runs 10 --json
coffer policy preview --draft nightly.yaml`,
			"0; 2 for an unknown policy, a refused draft or a refused configuration."),
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var doc *api.PolicyPreview
			var err error
			switch {
			case draft != "" && len(args) == 0:
				spec, rerr := a.readSpec(draft)
				if rerr != nil {
					return rerr
				}
				doc, err = command.RunOp[*api.PolicyPreview](cmd.Context(), a.App, "preview-policy-draft", &api.PreviewPolicyDraftInput{Runs: runs, Body: spec})
			case draft == "" && len(args) == 1:
				in := api.PreviewPolicyInput{PolicyParam: api.PolicyParam{Policy: args[0]}, Runs: runs}
				doc, err = command.RunOp[*api.PolicyPreview](cmd.Context(), a.App, "preview-policy", &in)
			default:
				return command.Usagef("name a policy, or give one not saved yet with --draft FILE (not both)")
			}
			if err != nil {
				return err
			}
			return a.Emit(doc, nil, func() { a.printPreview(doc) })
		},
	}
	preview.Flags().IntVar(&runs, "runs", 5, "how many of the next scheduled runs to show")
	preview.Flags().StringVar(&draft, "draft", "", `a policy not saved yet, as YAML or JSON ("-": standard input)`)
	cmd.AddCommand(command.RemoteToo(command.Op(check, "check-policies")), command.RemoteToo(command.Op(preview, "preview-policy", "preview-policy-draft")))
	return cmd
}

func (a *app) printPolicies(doc *api.PolicyCheck) {
	a.Printf("configuration is valid: %d connections, %d repositories, %d resource groups, %d policies\n",
		doc.Connections, doc.Repositories, doc.ResourceGroups, len(doc.Policies))
	l := doc.Limits
	a.Printf("limits: %d tasks, %s per host, %d per datastore, %s per repository, rate %s, per task %s\n",
		l.Tasks, limitOrNone(l.PerHost), l.PerDatastore, limitOrNone(l.PerRepository), policy.ByteRate(l.RateBytes), policy.ByteRate(l.TaskRateBytes))
	for _, name := range slices.Sorted(maps.Keys(l.MediaDrives)) {
		a.Printf("media library %s: %d drive(s) written at once (drive-limit)\n", name, l.MediaDrives[name])
	}
	for _, d := range doc.Policies {
		mode := d.Mode
		if d.FullEvery > 0 {
			mode += fmt.Sprintf(", full every %d runs", d.FullEvery)
		}
		if len(d.FullOn) > 0 {
			mode += ", full on " + strings.Join(d.FullOn, ", ")
		}
		sched := "no schedule (run with `coffer run`)"
		if d.Schedule != "" {
			sched = fmt.Sprintf("schedule %q, next %s", d.Schedule, d.NextRun.Local().Format("2006-01-02 15:04"))
		}
		snapshots := d.SnapshotMode + " snapshots"
		if d.Group == "datastore" {
			snapshots += " read from one storage snapshot per datastore"
		}
		a.Printf("\npolicy %s: %s, %s, repository %s, %s, %s\n", d.Name, mode, snapshots, d.Repository, d.Retention, sched)
		if d.LockSeconds > 0 {
			a.Printf("  immutable for %s after each backup\n", command.Seconds(d.LockSeconds))
		}
		if d.RPOSeconds > 0 {
			a.Printf("  rpo %s: a VM without a good point this recent is unprotected\n", policy.Duration(command.Seconds(d.RPOSeconds)))
		}
		if d.LockProblem != "" {
			a.Printf("  problem: immutable-for, but %s\n", d.LockProblem)
		}
		a.printSelection(d.Selected)
		for _, w := range d.Warnings {
			a.Printf("  warning: %s\n", w.Message)
		}
	}
	for _, m := range doc.Maintenance {
		what := m.Kind
		switch {
		case m.To != "":
			what += " to " + m.To
		case m.Pool != "":
			what += " to pool " + m.Pool + " of library " + m.Library
		case m.ReadDataSeconds > 0:
			what += ", reading all data every " + policy.Duration(command.Seconds(m.ReadDataSeconds)).String()
		}
		window := "any time"
		if m.Window != "" {
			window = "window " + m.Window
		}
		if m.After != "" {
			a.Printf("\nmaintenance %s: %s, after each run of policy %s\n", m.Name, what, m.After)
			continue
		}
		a.Printf("\nmaintenance %s: %s, schedule %q, %s\n", m.Name, what, m.Schedule, window)
		for _, r := range m.NextRuns {
			note := ""
			if r.Shares > 0 {
				note = fmt.Sprintf(" (packs: share %d of %d)", r.Share, r.Shares)
			}
			if r.MediaSet != "" {
				note += " (media set " + r.MediaSet + ")"
			}
			if !r.Starts {
				note += " (outside its window: skipped)"
			}
			a.Printf("  next %s%s\n", r.At.Local().Format("2006-01-02 15:04"), note)
		}
	}
}

func (a *app) printSelection(sel []api.Selection) {
	for _, s := range sel {
		if s.Error != "" {
			a.Printf("  %s: inventory failed: %s\n", s.Connection, s.Error)
			continue
		}
		a.Printf("  %s: %d of %d VMs: %s\n", s.Connection, len(s.VMs), s.VMsTotal, command.Clip(strings.Join(s.VMs, ", "), 400))
	}
}

func (a *app) printPreview(doc *api.PolicyPreview) {
	a.Printf("policy %s selects:\n", doc.Policy)
	a.printSelection(doc.Selected)
	if len(doc.NextRuns) == 0 {
		a.Printf("no schedule: it runs with `coffer run %s`\n", doc.Policy)
	} else {
		var runs []string
		for _, t := range doc.NextRuns {
			runs = append(runs, t.Local().Format("2006-01-02 15:04"))
		}
		a.Printf("next runs: %s\n", strings.Join(runs, ", "))
	}
	for _, w := range doc.Warnings {
		a.Printf("  warning: %s\n", w.Message)
	}
	if len(doc.Sources) == 0 {
		a.Printf("retention (%s): no points of this policy to judge\n", doc.Retention)
		return
	}
	a.Printf("retention (%s) of the points so far:\n", doc.Retention)
	a.PrintForget(doc.Sources, true)
}

func limitOrNone(n int) string {
	if n <= 0 {
		return "no limit"
	}
	return fmt.Sprint(n)
}
