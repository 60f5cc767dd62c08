package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
)

func (a *app) cmdPolicy() *cobra.Command {
	cmd := &cobra.Command{Use: "policy", Short: "inspect backup policies"}
	var offline bool
	check := &cobra.Command{
		Use:   "check",
		Short: "validate connections, repositories, limits and policies, and show which VMs each policy selects",
		Long: `Validate the engine's configuration sections (connections and their
options, repositories, limits, resource-groups, policies, storage-snapshots):
unknown keys, bad globs, bad cron schedules, references to missing
connections or repositories, and what a policy asks of its connections
that they cannot do (group: datastore without a storage snapshot provider,
a snapshot mode the platform cannot take). Every problem is reported at
once; the exit status is 2 if there is any. Nothing is contacted for this.

Then say what each policy will really do: warnings for settings that run
differently from how they read (as-is without a storage snapshot, quiesce
without snapshot: quiesced), and, unless --offline, after inventorying
every connection a policy uses, the VMs it selects, its next scheduled run,
and the selected VMs that will fail or degrade (running VMs under as-is,
VMs without a guest agent under quiesced).

EXAMPLES
    coffer policy check
    coffer policy check --offline --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.runPolicyCheck(cmd.Context(), offline) },
	}
	check.Flags().BoolVar(&offline, "offline", false, "only validate; do not contact the hypervisors")
	cmd.AddCommand(check)
	return cmd
}

type policyDoc struct {
	Name       string    `json:"name"`
	Mode       string    `json:"mode"`
	FullEvery  int       `json:"full_every,omitempty"`
	FullOn     []string  `json:"full_on,omitempty"`
	Snapshot   string    `json:"snapshot"`
	Group      string    `json:"group,omitempty"`
	Repository string    `json:"repository"`
	Schedule   string    `json:"schedule,omitempty"`
	NextRun    time.Time `json:"next_run,omitzero"`
	Retention  string    `json:"retention"`
	Immutable  string    `json:"immutable_for,omitempty"`
	// LockProblem says why the repository cannot lock the points the
	// policy asks to be immutable ("" when it can, or with --offline).
	LockProblem string         `json:"lock_problem,omitempty"`
	Selected    []selectionDoc `json:"selected,omitempty"`
	Warnings    []finding      `json:"warnings,omitempty"`
}

type selectionDoc struct {
	Connection string   `json:"connection"`
	Total      int      `json:"vms_total"`
	VMs        []string `json:"vms"`
	Error      string   `json:"error,omitempty"`
}

func (a *app) runPolicyCheck(ctx context.Context, offline bool) error {
	cfg, warnings, err := a.policyConfig()
	if err != nil {
		return err
	}
	inventory := map[string][]hypervisor.VM{}
	invErr := map[string]error{}
	if !offline {
		for _, c := range cfg.Connections {
			conns, _, err := a.openConnectors(ctx, cfg, []string{c.Name})
			if err == nil {
				inventory[c.Name], err = conns[c.Name].Inventory(ctx)
			}
			invErr[c.Name] = err
		}
	}
	var docs []policyDoc
	failed, unlockable := 0, 0
	for _, p := range cfg.Policies {
		d := policyDoc{Name: p.Name, Mode: nameOr(p.Mode, "incremental"), FullEvery: p.FullEvery, FullOn: p.FullOn,
			Snapshot: nameOr(p.Snapshot, string(hypervisor.CrashConsistent)), Group: p.Group, Repository: nameOr(p.Repository, "(default)"),
			Schedule: p.Schedule, Retention: p.Retention.String(), Warnings: warnings[p.Name]}
		if sc, _ := p.ParseSchedule(); sc != nil {
			d.NextRun = sc.Next(time.Now())
		}
		if p.ImmutableFor > 0 {
			d.Immutable = time.Duration(p.ImmutableFor).String()
			if !offline {
				if d.LockProblem = a.lockProblem(ctx, cfg, p.Repository); d.LockProblem != "" {
					unlockable++
				}
			}
		}
		for _, c := range p.ConnectionNames() {
			if offline {
				continue
			}
			s := selectionDoc{Connection: c, VMs: []string{}}
			if err := invErr[c]; err != nil {
				s.Error = err.Error()
				failed++
			}
			s.Total = len(inventory[c])
			selected := p.SelectVMs(inventory[c])
			for _, vm := range selected {
				s.VMs = append(s.VMs, vm.Name)
			}
			d.Selected = append(d.Selected, s)
			d.Warnings = append(d.Warnings, selectionFindings(cfg, p, c, selected)...)
		}
		docs = append(docs, d)
	}
	if a.jsonOut {
		if err := a.printJSON(map[string]any{"valid": unlockable == 0, "connections": len(cfg.Connections), "repositories": len(cfg.Repositories),
			"resource_groups": len(cfg.ResourceGroups), "policies": docs}); err != nil {
			return err
		}
	} else {
		a.printPolicies(cfg, docs)
	}
	if unlockable > 0 {
		return reportedError{usagef("%d policies ask for immutable-for on a repository that cannot lock objects", unlockable)}
	}
	if failed > 0 {
		return partialError{fmt.Sprintf("%d connection inventories failed", failed)}
	}
	return nil
}

// lockProblem tells why the policy's repository cannot make points
// immutable, "" when it can. Only the storage is opened: no password needed.
func (a *app) lockProblem(ctx context.Context, cfg *policy.Config, name string) string {
	loc := a.res.String("repository")
	if rc, ok := cfg.Repository(name); ok {
		loc = rc.Location
	}
	st, err := a.openStore(ctx, loc)
	if err != nil {
		return fmt.Sprintf("cannot open the repository to check it: %v", err)
	}
	defer st.Close()
	if !st.Properties().Retention {
		return fmt.Sprintf("%s cannot lock objects: use an S3 bucket with Object Lock, or remove immutable-for", st.Properties().Location)
	}
	return ""
}

func (a *app) printPolicies(cfg *policy.Config, docs []policyDoc) {
	a.printf("configuration is valid: %d connections, %d repositories, %d resource groups, %d policies\n",
		len(cfg.Connections), len(cfg.Repositories), len(cfg.ResourceGroups), len(cfg.Policies))
	l := cfg.Limits.WithDefaults()
	a.printf("limits: %d tasks, %s per host, %d per datastore, %s per repository, rate %s, per task %s\n",
		l.Tasks, limitOrNone(l.PerHost), l.PerDatastore, limitOrNone(l.PerRepository), l.Rate, l.TaskRate)
	for _, d := range docs {
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
		snapshots := d.Snapshot + " snapshots"
		if d.Group == "datastore" {
			snapshots += " read from one storage snapshot per datastore"
		}
		a.printf("\npolicy %s: %s, %s, repository %s, %s, %s\n", d.Name, mode, snapshots, d.Repository, d.Retention, sched)
		if d.Immutable != "" {
			a.printf("  immutable for %s after each backup\n", d.Immutable)
		}
		if d.LockProblem != "" {
			a.printf("  problem: immutable-for, but %s\n", d.LockProblem)
		}
		for _, s := range d.Selected {
			if s.Error != "" {
				a.printf("  %s: inventory failed: %s\n", s.Connection, s.Error)
				continue
			}
			a.printf("  %s: %d of %d VMs: %s\n", s.Connection, len(s.VMs), s.Total, clip(strings.Join(s.VMs, ", "), 400))
		}
		for _, w := range d.Warnings {
			a.printf("  warning: %s\n", w.Message)
		}
	}
}

func limitOrNone(n int) string {
	if n <= 0 {
		return "no limit"
	}
	return fmt.Sprint(n)
}

func nameOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
