package replicaops

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/replica"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/service"
)

// RunReplication brings the standbys of replication call.Name (call.VM:
// that VM's only) to their VMs' newest backup points. It runs on the
// worker of the replication's DR host when the server has a fleet
// (none ready: an error saying so), else in this process; the process
// the request came to records the standbys in the catalog. A VM whose
// standby failed does not stop the others; the run then fails naming it.
func (s Ops) RunReplication(ctx context.Context, call *api.RunReplicationInput) (*api.ReplicationRun, error) {
	cfg, err := s.EngineConfig(ctx)
	if err != nil {
		return nil, err
	}
	repl, ok := cfg.Replication(call.Name)
	if !ok {
		return nil, api.Errorf(api.NotFound, "no replication named %q (coffer config list replications)", call.Name)
	}
	spec := service.JobSpec{Kind: job.KindReplicate, Object: onReplications + "/" + repl.Name, Repository: repl.Repository,
		VM: call.VM, Detail: "replication " + repl.Name}
	if err := s.toDRWorker(ctx, &call.WorkerParam, cfg, repl); err != nil {
		return nil, err
	}
	if out, remote, err := service.OnWorker[*api.ReplicationRun](ctx, s.Service, "run-replication", &call.WorkerParam, call, spec); remote {
		return out, s.record(ctx, repl, out, err)
	}
	out, err := service.Run(ctx, s.Service, spec, func(ctx context.Context, t service.Job) (*api.ReplicationRun, error) {
		return service.WithRepo(ctx, s.Service, service.NamedRepo(repl.Repository), service.RestoreLease("replication "+repl.Name),
			func(r *repo.Repository) (*api.ReplicationRun, error) { return s.replicate(ctx, t, r, repl, call.VM) })
	})
	if service.JobRecordedElsewhere(ctx) {
		return out, err // a worker's hand-off: the server records it
	}
	return out, s.record(ctx, repl, out, err)
}

// toDRWorker names in w, when the request names none and the server has
// a fleet, the worker of the replication's DR host (its connection's
// host), or any ready worker reaching the connection when it names no
// host. None ready is an error naming why: the standbys are on that
// host's disks, never on the server's.
func (s Ops) toDRWorker(ctx context.Context, w *api.WorkerParam, cfg *policy.Config, repl policy.Replication) error {
	c, _ := s.RemoteRunner().(interface {
		ChooseWorker(ctx context.Context, rt engine.Route, optional bool) (string, error)
	})
	if c == nil || w.Worker != "" {
		return nil
	}
	cn, _ := cfg.Connection(repl.Connection)
	rt := engine.RouteOf(cfg, policy.Policy{Repository: repl.Repository}, repl.Connection, hypervisor.VM{Host: cn.HostOption()})
	if len(rt.Hosts) == 1 && rt.Hosts[0] == "" {
		rt.Hosts = nil
	}
	var err error
	w.Worker, err = c.ChooseWorker(ctx, rt, false)
	return err
}

// replicate runs the standbys of the VMs repl names, each to its newest
// point in r.
func (s Ops) replicate(ctx context.Context, t service.Job, r *repo.Repository, repl policy.Replication, only string) (*api.ReplicationRun, error) {
	host, _ := os.Hostname()
	out := &api.ReplicationRun{Replication: repl.Name, Host: host, VMs: []api.ReplicationRunVM{}}
	newest, err := newestPoints(ctx, r, repl, only)
	if err != nil {
		return nil, err
	}
	if len(newest) == 0 {
		return out, service.Invalidf("replication %s: the repository has no backup point of a VM it names (%v)", repl.Name, repl.VMs)
	}
	var failed []string
	vsphereDR := s.isVSphereDR(ctx, repl)
	for _, p := range newest {
		var vm api.ReplicationRunVM
		if vsphereDR {
			vm = s.replicateVSphere(ctx, t, r, repl, p)
		} else {
			vm = s.replicateVM(ctx, t, r, repl, p)
		}
		if vm.Error != "" {
			failed = append(failed, vm.VM)
		}
		out.VMs = append(out.VMs, vm)
	}
	if len(failed) > 0 {
		return out, fmt.Errorf("replication %s: the standby of %d of %d VMs failed: %v", repl.Name, len(failed), len(newest), failed)
	}
	return out, nil
}

func (s Ops) replicateVM(ctx context.Context, t service.Job, r *repo.Repository, repl policy.Replication, p *repo.Point) api.ReplicationRunVM {
	vm := api.ReplicationRunVM{VM: p.Source.VMName, BackupPoint: p.ID.String(), SourceTime: p.Time, Points: []api.ReplicaPoint{}}
	vm.Directory = repl.StandbyDir(vm.VM, datastoreOf(p))
	res, err := replica.Run(ctx, r, p, replica.Options{Dir: vm.Directory, Keep: repl.KeepOrDefault(), Networks: repl.Networks, Log: s.Logger()})
	if err != nil {
		vm.Error = err.Error()
		t.Log(slog.LevelError, "the standby was not brought to the newest point", "vm", vm.VM, "point", p.ID.String(), "err", err)
		return vm
	}
	if err := s.defineStandby(ctx, repl, vm.Directory, p); err != nil {
		vm.Error = "the standby's domain: " + err.Error()
		t.Log(slog.LevelError, "the standby's domain was not defined on the DR host", "vm", vm.VM, "err", err)
	}
	vm.UpToDate, vm.Spans = res.UpToDate, res.Spans
	if !res.UpToDate {
		vm.BytesRead, vm.BytesWritten = res.Point.BytesRead, res.Point.BytesWritten
	}
	if st, err := replica.LoadState(vm.Directory); err == nil {
		vm.Points = pointDocs(st.Points)
	}
	t.Log(slog.LevelInfo, "the standby equals the newest point", "vm", vm.VM, "point", p.ID.String(), "up_to_date", res.UpToDate,
		"spans", res.Spans, "bytes_read", vm.BytesRead, "seq", res.Point.Seq)
	return vm
}

// newestPoints is the newest point of every VM repl names, by VM name.
func newestPoints(ctx context.Context, r *repo.Repository, repl policy.Replication, only string) ([]*repo.Point, error) {
	all, err := r.Points(ctx, nil)
	if err != nil {
		return nil, err
	}
	byVM := map[string]*repo.Point{}
	for _, p := range all {
		name := p.Source.VMName
		if !repl.Matches(name) || (only != "" && name != only) {
			continue
		}
		if cur := byVM[name]; cur == nil || p.Time.After(cur.Time) {
			byVM[name] = p
		}
	}
	out := make([]*repo.Point, 0, len(byVM))
	for _, p := range byVM {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *repo.Point) int { return cmp.Compare(a.Source.VMName, b.Source.VMName) })
	return out, nil
}

// datastoreOf is the datastore of a point's first disk, as its VM's
// configuration names it ("" for a disk image's point).
func datastoreOf(p *repo.Point) string {
	var cfg hypervisor.VMConfig
	if json.Unmarshal(p.VMConfig, &cfg) != nil || len(cfg.Disks) == 0 {
		return ""
	}
	return cfg.Disks[0].Datastore
}

func pointDocs(ps []replica.Point) []api.ReplicaPoint {
	out := make([]api.ReplicaPoint, 0, len(ps))
	for _, p := range ps {
		out = append(out, api.ReplicaPoint{Seq: p.Seq, BackupPoint: p.BackupPoint, SourceTime: p.SourceTime, ReplicatedAt: p.ReplicatedAt,
			BytesRead: p.BytesRead, BytesWritten: p.BytesWritten})
	}
	return out
}
