package planops

import (
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/apidoc"
	"github.com/coffer-backup/coffer/internal/service/policyfind"

	"cmp"
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/configobj"
	"github.com/coffer-backup/coffer/internal/forget"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/maintenance"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
)

// PolicyCheck validates the configuration's engine sections (what a
// policy asks of its connections that they cannot do refuses it with an
// invalid error) and says what each policy will really do: warnings for
// settings that run differently from how they read and, unless offline,
// after inventorying every connection, the VMs each policy selects. A
// policy asking for object lock on a repository that cannot lock makes
// the result invalid (an invalid error with the document); failed
// inventories make it partial. A connection that this process would open
// although its hypervisor's disks are on another host (a remote libvirt
// URI that no worker reaches: RefuseElsewhere) refuses it.
func (s Ops) PolicyCheck(ctx context.Context, in *api.CheckPoliciesInput) (*api.PolicyCheck, error) {
	offline := in.Offline
	cfg, warnings, err := s.PolicyConfig(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, c := range cfg.Connections {
		names = append(names, c.Name)
	}
	if err := s.RefuseElsewhere(ctx, cfg, names); err != nil {
		return nil, err
	}
	inventory := map[string][]hypervisor.VM{}
	invErr := map[string]error{}
	if !offline {
		for _, c := range cfg.Connections {
			inventory[c.Name], invErr[c.Name] = s.inventory(ctx, cfg, c.Name)
		}
	}
	l := cfg.Limits.WithDefaults()
	doc := &api.PolicyCheck{Connections: len(cfg.Connections), Repositories: len(cfg.Repositories), ResourceGroups: len(cfg.ResourceGroups),
		Limits: api.Limits{Tasks: l.Tasks, PerHost: l.PerHost, PerDatastore: l.PerDatastore, PerRepository: l.PerRepository,
			RateBytes: int64(l.Rate), TaskRateBytes: int64(l.TaskRate), MediaDrives: map[string]int{}}, Policies: []api.PolicyReport{}}
	for _, ml := range cfg.MediaLibraries {
		if ml.DriveLimit > 0 {
			doc.Limits.MediaDrives[ml.Name] = ml.DriveLimit
		}
	}
	failed, unlockable := 0, 0
	for _, p := range cfg.Policies {
		d := policyReport(p, warnings[p.Name])
		if p.ImmutableFor > 0 && !offline {
			if d.LockProblem = s.lockProblem(ctx, cfg, p.Repository); d.LockProblem != "" {
				unlockable++
			}
		}
		if !offline {
			d.Selected = []api.Selection{}
			for _, c := range p.ConnectionNames() {
				sel, selected := selection(p, c, inventory[c], invErr[c])
				if sel.Error != "" {
					failed++
				}
				d.Selected = append(d.Selected, sel)
				d.Warnings = append(d.Warnings, policyfind.SelectionFindings(cfg, p, c, selected)...)
			}
		}
		doc.Policies = append(doc.Policies, d)
	}
	maint, err := s.maintenanceReport(ctx, cfg, time.Now())
	if err != nil {
		return nil, err
	}
	doc.Maintenance = maint
	doc.Valid = unlockable == 0
	if unlockable > 0 {
		return doc, service.Invalidf("%d policies ask for immutable-for on a repository that cannot lock objects", unlockable)
	}
	if failed > 0 {
		return doc, api.Errorf(api.Partial, "%d connection inventories failed", failed)
	}
	return doc, nil
}

func (s Ops) inventory(ctx context.Context, cfg *policy.Config, conn string) ([]hypervisor.VM, error) {
	conns, err := s.OpenConnectors(ctx, cfg, []string{conn})
	if err != nil {
		return nil, err
	}
	defer conns.Close()
	return conns.Conns[conn].Inventory(ctx)
}

func policyReport(p policy.Policy, warnings []policyfind.Finding) api.PolicyReport {
	d := api.PolicyReport{Name: p.Name, Mode: cmp.Or(p.Mode, "incremental"), FullEvery: p.FullEvery, FullOn: apidoc.NonNil(p.FullOn),
		SnapshotMode: cmp.Or(p.Snapshot, string(hypervisor.CrashConsistent)), Group: p.Group, Repository: cmp.Or(p.Repository, "(default)"),
		Schedule: p.Schedule, Retention: p.Retention.String(), LockSeconds: time.Duration(p.ImmutableFor).Seconds(),
		RPOSeconds: time.Duration(p.RPO).Seconds(),
		Warnings:   append([]policyfind.Finding{}, warnings...)}
	if sc, _ := p.ParseSchedule(); sc != nil {
		d.NextRun = sc.Next(time.Now())
	}
	return d
}

// selection is what p selects of a connection's inventory.
func selection(p policy.Policy, conn string, vms []hypervisor.VM, err error) (api.Selection, []hypervisor.VM) {
	s := api.Selection{Connection: conn, VMsTotal: len(vms), VMs: []string{}}
	if err != nil {
		s.Error = err.Error()
	}
	selected := p.SelectVMs(vms)
	for _, vm := range selected {
		s.VMs = append(s.VMs, vm.Name)
	}
	return s, selected
}

// lockProblem tells why a repository of the configuration cannot make
// points immutable, "" when it can. Only the storage is opened: no
// password needed.
func (s Ops) lockProblem(ctx context.Context, cfg *policy.Config, repository string) string {
	st, err := s.OpenStore(ctx, s.LocationOf(cfg, repository))
	if err != nil {
		return fmt.Sprintf("cannot open the repository to check it: %v", err)
	}
	defer st.Close()
	if !st.Properties().Retention {
		return fmt.Sprintf("%s cannot lock objects: use an S3 bucket with Object Lock, or remove immutable-for", st.Properties().Location)
	}
	return ""
}

// PolicyPreview says what running a policy would do now, changing
// nothing: the VMs it selects on each connection, its next scheduled runs,
// and what its retention would keep and remove of the points it made so
// far (forget's verdict, as a dry run on the policy's repository). A draft
// that would make the configuration invalid is refused with the problems
// it adds, as saving it would be.
func (s Ops) PolicyPreview(ctx context.Context, in *api.PreviewPolicyInput) (*api.PolicyPreview, error) {
	return s.policyPreview(ctx, previewOf{Policy: in.Policy, Runs: in.Runs})
}

// previewOf names a policy, or gives one not saved yet, and how many of
// its next runs to show.
type previewOf struct {
	Policy string
	// Draft, when set, is a policy not saved yet (what the console's
	// editor holds): its spec in the configuration file's schema, as
	// CreateConfigObject takes it. It is checked like a change and
	// previewed as if saved, over the policy of its name if there is one
	// (Policy is then ignored). A draft without a name is called "draft".
	Draft map[string]any
	Runs  int
}

func (s Ops) policyPreview(ctx context.Context, in previewOf) (*api.PolicyPreview, error) {
	var cfg *policy.Config
	var warnings map[string][]policyfind.Finding
	var err error
	if in.Draft != nil {
		cfg, in.Policy, err = s.draftConfig(ctx, in.Draft)
		if err != nil {
			return nil, err
		}
		p, _ := cfg.Policy(in.Policy)
		// The draft's errors refused it already: what is left are warnings.
		warnings = map[string][]policyfind.Finding{p.Name: policyfind.PolicyFindings(cfg, p)}
	} else if cfg, warnings, err = s.PolicyConfig(ctx); err != nil {
		return nil, err
	}
	p, ok := cfg.Policy(in.Policy)
	if !ok {
		return nil, service.Invalidf("no policy named %q (`coffer policy check` lists them)", in.Policy)
	}
	doc := &api.PolicyPreview{Policy: p.Name, Selected: []api.Selection{}, NextRuns: []time.Time{}, Retention: p.Retention.String(),
		Warnings: append([]policyfind.Finding{}, warnings[p.Name]...), Sources: []api.ForgetSource{}}
	if sc, _ := p.ParseSchedule(); sc != nil {
		t := time.Now()
		for range max(in.Runs, 0) {
			t = sc.Next(t)
			doc.NextRuns = append(doc.NextRuns, t)
		}
	}
	for _, c := range p.ConnectionNames() {
		vms, err := s.inventory(ctx, cfg, c)
		sel, selected := selection(p, c, vms, err)
		doc.Selected = append(doc.Selected, sel)
		doc.Warnings = append(doc.Warnings, policyfind.SelectionFindings(cfg, p, c, selected)...)
	}
	if !p.Retention.Empty() {
		groups, err := service.WithRepo(ctx, s.Service, service.NamedRepoIn(cfg, p.Repository), service.NoLease, func(r *repo.Repository) ([]forget.Group, error) {
			return forget.Run(ctx, r, forget.Options{Policy: p.Retention, Tags: map[string]string{"policy": p.Name}, DryRun: true})
		})
		if err != nil {
			return nil, err
		}
		doc.Sources = apidoc.ForgetDocs(groups)
	}
	return doc, nil
}

// maintenanceReport checks the maintenance section in effect (the
// file's and the catalog's schedules) against cfg, the configuration in
// effect, and lists its jobs with their next runs after now (and the
// media set each of a media copy's lands in).
func (s Ops) maintenanceReport(ctx context.Context, cfg *policy.Config, now time.Time) ([]api.MaintenanceReport, error) {
	st, err := s.ConfigInEffect(ctx)
	if err != nil {
		return nil, err
	}
	jobs, err := st.Maintenance.Jobs(cfg)
	if err != nil {
		return nil, service.Invalidf("%s: %v", service.ConfigWhere(st), err)
	}
	out := []api.MaintenanceReport{}
	for _, j := range jobs {
		r := api.MaintenanceReport{Name: j.Name, Kind: j.Kind, Repository: j.Repository, Schedule: j.Spec,
			ReadDataSeconds: j.ReadDataPeriod.Seconds(), To: j.To, After: j.After, Library: j.Library, Pool: j.Pool, NextRuns: []api.PlannedRun{}}
		if j.Window != nil {
			r.Window = j.Window.String()
		}
		if j.After != "" {
			out = append(out, r) // it runs when the policy's runs end
			continue
		}
		for _, p := range maintenance.Next(j, now, 3) {
			run := api.PlannedRun{At: p.At, Starts: p.Starts, Share: p.Share, Shares: p.Shares}
			if j.Kind == "media-copy" {
				run.MediaSet = j.SetFor(p.At).Pool
			}
			r.NextRuns = append(r.NextRuns, run)
		}
		out = append(out, r)
	}
	return out, nil
}

// draftConfig is the configuration in effect with a draft policy put in,
// checked like a change through the API (refused for the problems it
// adds), and the draft's name.
func (s Ops) draftConfig(ctx context.Context, draft map[string]any) (*policy.Config, string, error) {
	st, err := s.ReadConfig(ctx)
	if err != nil {
		return nil, "", err
	}
	if name, _ := draft["name"].(string); name == "" {
		draft = maps.Clone(draft)
		draft["name"] = "draft"
	}
	plan, err := st.PlanDraft(configobj.Policy, draft, s.CheckConfig)
	if err != nil {
		return nil, "", err
	}
	return plan.Engine, plan.Name, nil
}

// PolicyDraftPreview previews a policy not saved yet, as PolicyPreview
// previews a saved one. The preview lists the VMs of the connections the
// draft selects from: the caller must see them (Conn.Audit), as listing
// them would need.
func (s Ops) PolicyDraftPreview(ctx context.Context, in *api.PreviewPolicyDraftInput) (*api.PolicyPreview, error) {
	doc, err := s.policyPreview(ctx, previewOf{Draft: in.Body, Runs: in.Runs})
	if doc != nil {
		actor := s.Actor(ctx)
		for _, sel := range doc.Selected {
			if path := auth.ConnectionPath(sel.Connection); !auth.Allowed(actor, path, auth.ConnAudit) {
				return nil, api.Errorf(api.Denied, "%s lacks %s on %s, a connection the draft selects VMs of", actor, auth.ConnAudit, path)
			}
		}
	}
	return doc, err
}
