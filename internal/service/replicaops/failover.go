package replicaops

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/bootverify"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/failover"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/replica"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/service"
)

// onFailoverPlans is the ACL object of the failover plans; their
// operations need Sys.Failover there.
const onFailoverPlans = "/system/failover-plans"

// Kinds of failover operations (api.FailoverRun.Kind) and their IDs.
const (
	kindTest     = "test"
	kindFailover = "failover"
	kindPlanned  = "planned"
	kindFailback = "failback"
)

var failoverOpIDs = map[string]string{kindTest: "test-failover", kindFailover: "failover", kindPlanned: "planned-failover", kindFailback: "failback"}

// TestFailover runs a test failover of plan in.Name: its VMs start on
// throw-away overlays of their standbys, isolated, group by group, are
// probed, and everything is discarded.
func (s Ops) TestFailover(ctx context.Context, in *api.FailoverInput) (*api.FailoverRun, error) {
	return s.failoverOp(ctx, in, kindTest)
}

// Failover makes the plan's standbys (or in.VM's) the running VMs, from
// their newest restore point or in.Seq, group by group.
func (s Ops) Failover(ctx context.Context, in *api.FailoverInput) (*api.FailoverRun, error) {
	return s.failoverOp(ctx, in, kindFailover)
}

// PlannedFailover replicates the VMs' newest backup points (their final
// ones, taken with the sources shut down) and fails over onto them.
func (s Ops) PlannedFailover(ctx context.Context, in *api.FailoverInput) (*api.FailoverRun, error) {
	return s.failoverOp(ctx, in, kindPlanned)
}

// Failback writes what changed at the DR site back onto the original
// VMs' disks and clears the standbys' failed-over marks.
func (s Ops) Failback(ctx context.Context, in *api.FailoverInput) (*api.FailoverRun, error) {
	return s.failoverOp(ctx, in, kindFailback)
}

func (s Ops) failoverOp(ctx context.Context, in *api.FailoverInput, kind string) (*api.FailoverRun, error) {
	cfg, err := s.EngineConfig(ctx)
	if err != nil {
		return nil, err
	}
	plan, ok := cfg.FailoverPlan(in.Name)
	if !ok {
		return nil, api.Errorf(api.NotFound, "no failover plan named %q (coffer config list failover-plans)", in.Name)
	}
	repl, _ := cfg.Replication(plan.Replication) // validated with the plan
	if in.To != "" && kind != kindFailback {
		return nil, service.Invalidf("--to (a new location) is for a failback only")
	}
	vsphere := s.isVSphereDR(ctx, repl)
	if vsphere && in.To != "" {
		return nil, vsphereNewLocationRefusal()
	}
	spec := service.JobSpec{Kind: job.KindFailover, Object: onFailoverPlans + "/" + plan.Name, Repository: repl.Repository,
		VM: in.VM, Detail: kind + " of failover plan " + plan.Name}
	if err := s.toDRWorker(ctx, &in.WorkerParam, cfg, repl); err != nil {
		return nil, err
	}
	if out, remote, err := service.OnWorker[*api.FailoverRun](ctx, s.Service, failoverOpIDs[kind], &in.WorkerParam, in, spec); remote {
		return out, err
	}
	to := ""
	if in.To != "" {
		if to, err = s.HostPath(s.Config.Files.RestoreDir, service.RestoreDir, in.To); err != nil {
			return nil, err
		}
	}
	return service.Run(ctx, s.Service, spec, func(ctx context.Context, t service.Job) (*api.FailoverRun, error) {
		fp, err := s.resolvePlan(ctx, plan, repl, in.VM)
		if err != nil {
			return nil, err
		}
		t.Log(slog.LevelInfo, "failover run: "+kind, runField, kind)
		attach := s.attachDomains
		switch {
		case vsphere:
			attach = s.attachVSphere
		case kind == kindTest:
			attach = s.attachCopies
		}
		closeConn, err := attach(ctx, repl, &fp)
		if err != nil {
			return nil, err
		}
		defer closeConn()
		host, _ := os.Hostname()
		out := &api.FailoverRun{Plan: plan.Name, Kind: kind, Host: host, Started: time.Now().UTC(), Steps: []api.FailoverStep{},
			Probes: []api.FailoverProbe{}, VMs: []api.FailoverVM{}, Failback: []api.FailbackVM{}}
		log := s.Logger()
		switch kind {
		case kindTest:
			rep, err := failover.Rehearse(ctx, fp, failover.RehearseOptions{StateDir: s.Config.StateDir, Seq: in.Seq, Log: log, Watch: jobWatcher{t},
				Destroy: s.destroyCopy})
			return passed(fill(out, rep, nil), err)
		case kindFailover:
			rep, started, err := failover.RunPlan(ctx, fp, nil, failover.Options{Seq: in.Seq, Log: log, Watch: jobWatcher{t}})
			return passed(fill(out, rep, started), err)
		case kindPlanned:
			return s.planned(ctx, t, out, fp, repl, vsphere)
		}
		if vsphere {
			return s.failbackVSphere(ctx, t, out, fp, repl)
		}
		return s.failback(ctx, t, out, fp, repl, to)
	})
}

// planned replicates each VM of the plan to its newest backup point and
// fails over onto exactly that point (a vSphere standby: onto a final
// point of its shut-down source, which needs the source's connection).
func (s Ops) planned(ctx context.Context, t service.Job, out *api.FailoverRun, fp failover.Plan, repl policy.Replication, vsphere bool) (*api.FailoverRun, error) {
	final := map[string]string{}
	closeSources := func() {}
	defer func() { closeSources() }()
	err := withRepo(ctx, s, repl, func(r *repo.Repository) error {
		for _, g := range fp.Groups {
			for _, vm := range g.VMs {
				run, err := s.replicate(ctx, t, r, repl, vm.Name)
				if err != nil {
					return fmt.Errorf("the final replication of %s: %w", vm.Name, err)
				}
				for _, v := range run.VMs {
					final[v.VM] = v.BackupPoint
				}
			}
		}
		if vsphere {
			var err error
			closeSources, err = s.attachVSphereSources(ctx, r, &fp, final)
			return err
		}
		return nil
	})
	if err != nil {
		return out, err
	}
	rep, started, err := failover.RunPlan(ctx, fp, final, failover.Options{Log: s.Logger(), Watch: jobWatcher{t}})
	return passed(fill(out, rep, started), err)
}

// failback writes back each failed-over VM of the plan onto its original
// disks, as its failover point's recorded configuration names them.
func (s Ops) failback(ctx context.Context, t service.Job, out *api.FailoverRun, fp failover.Plan, repl policy.Replication, to string) (*api.FailoverRun, error) {
	err := withRepo(ctx, s, repl, func(r *repo.Repository) error {
		for _, g := range fp.Groups {
			for _, vm := range g.VMs {
				st, err := replica.LoadState(vm.Dir)
				if err != nil {
					return err
				}
				if st.FailedOver == nil {
					t.Log(slog.LevelInfo, "not failed over: nothing to fail back", "vm", vm.Name)
					continue
				}
				began := time.Now()
				res, err := s.failbackVM(ctx, r, vm, st.FailedOver.BackupPoint, to)
				step := api.FailoverStep{VM: vm.Name, Name: "failback", Seconds: time.Since(began).Seconds()}
				if err != nil {
					step.Error = err.Error()
					jobWatcher{t}.step(step)
					out.Steps = append(out.Steps, step) // the document shows the failure (the Failback list the successes)
					return err
				}
				step.Detail = fmt.Sprintf("%s: %d bytes written of %d read", res.Mode, res.BytesWritten, res.BytesRead)
				jobWatcher{t}.step(step)
				out.Failback = append(out.Failback, api.FailbackVM{VM: vm.Name, Mode: res.Mode, BytesRead: res.BytesRead, BytesWritten: res.BytesWritten, Disks: res.Disks})
			}
		}
		return nil
	})
	out.Passed = err == nil
	out.Seconds = time.Since(out.Started).Seconds()
	return out, err
}

// failbackVM fails one VM back: onto its original disks, as its
// failover point's recorded configuration names them, or (to) as new
// disk files in to/VM.
func (s Ops) failbackVM(ctx context.Context, r *repo.Repository, vm failover.VM, point, to string) (*failover.FailbackResult, error) {
	if to != "" {
		return failover.FailbackTo(ctx, vm, filepath.Join(to, fileName(vm.Name)), s.Logger())
	}
	targets, err := originalDisks(ctx, r, point)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", vm.Name, err)
	}
	return failover.Failback(ctx, vm, targets, s.Logger())
}

// fileName keeps a VM's name one component of a path.
func fileName(s string) string {
	return strings.NewReplacer("/", "_", "\x00", "_").Replace(s)
}

// originalDisks are the disk files of the VM as its backup point id
// recorded them, by disk key.
func originalDisks(ctx context.Context, r *repo.Repository, id string) (map[string]string, error) {
	p, err := r.FindPoint(ctx, id)
	if err != nil {
		return nil, err
	}
	var cfg hypervisor.VMConfig
	if err := json.Unmarshal(p.VMConfig, &cfg); err != nil {
		return nil, fmt.Errorf("backup point %s: its VM configuration: %w", p.ID.Short(), err)
	}
	out := map[string]string{}
	for _, d := range cfg.Disks {
		out[d.Key] = d.Path
	}
	return out, nil
}

func withRepo(ctx context.Context, s Ops, repl policy.Replication, f func(*repo.Repository) error) error {
	_, err := service.WithRepo(ctx, s.Service, service.NamedRepo(repl.Repository), service.RestoreLease("failover of replication "+repl.Name),
		func(r *repo.Repository) (struct{}, error) { return struct{}{}, f(r) })
	return err
}

// resolvePlan finds each VM's standby directory (as the catalog recorded
// its last run, else where the replication puts it) and parses the probes.
func (s Ops) resolvePlan(ctx context.Context, plan policy.FailoverPlan, repl policy.Replication, only string) (failover.Plan, error) {
	dirs := map[string]string{}
	if cat, err := s.OpenCatalog(ctx); err == nil {
		if rs, ok := catalog.ReplicasOf(cat); ok {
			rows, _ := rs.ListReplicas(ctx, repl.Name)
			for _, row := range rows {
				dirs[row.VM] = row.Directory
			}
		}
		_ = cat.Close() // a read
	}
	fp := failover.Plan{Name: plan.Name}
	for _, g := range plan.Groups {
		fg := failover.Group{ProbeTimeout: g.ProbeTimeoutOrDefault(), Delay: time.Duration(g.Delay)}
		for _, p := range g.Probes {
			pr, err := bootverify.ParseProbe(p)
			if err != nil {
				return fp, service.Invalidf("failover plan %s: %v", plan.Name, err)
			}
			fg.Probes = append(fg.Probes, pr)
		}
		for _, v := range g.VMs {
			if only != "" && v.Name != only {
				continue
			}
			dir := dirs[v.Name]
			if dir == "" {
				dir = repl.StandbyDir(v.Name, "")
			}
			fg.VMs = append(fg.VMs, failover.VM{Name: v.Name, Dir: dir, Address: v.Address, CloudInit: v.CloudInit,
				AgentAddress: v.AgentAddress, AgentGateway: v.AgentGateway, Readdress: v.Readdress, Script: v.Script})
		}
		if len(fg.VMs) > 0 {
			fp.Groups = append(fp.Groups, fg)
		}
	}
	if len(fp.Groups) == 0 {
		return fp, service.Invalidf("failover plan %s has no VM named %q", plan.Name, only)
	}
	return fp, nil
}

// RemoveFailoverLeftovers stops the VMs (QEMUs of coffer's, or copies of
// standby domains, through their connections) and removes the overlays
// of test failovers that a killed coffer left in the state directory: a
// server and a worker run it at start, so that a test killed midway
// leaves nothing running past the next start, not only past the next
// test.
func (s Ops) RemoveFailoverLeftovers(ctx context.Context) {
	if s.Config.StateDir != "" {
		failover.RemoveLeftoversOf(ctx, s.Config.StateDir, s.destroyCopy, s.Logger())
	}
}
