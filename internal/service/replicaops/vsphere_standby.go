package replicaops

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/failover"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/replica/vsstandby"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/service"
)

// vsphereDR is a vSphere DR site's connection (*vsphere.Connector).
type vsphereDR interface {
	vsstandby.Connector
	vsstandby.DiskConn
	InstantStateDir() string
}

// replicateVSphere keeps the standby of point p's VM on the replication's
// vSphere DR site: the VM VM-standby on the datastore the storage map
// names (internal/replica/vsstandby).
func (s Ops) replicateVSphere(ctx context.Context, t service.Job, r *repo.Repository, repl policy.Replication, p *repo.Point) api.ReplicationRunVM {
	vm := api.ReplicationRunVM{VM: p.Source.VMName, BackupPoint: p.ID.String(), SourceTime: p.Time, Points: []api.ReplicaPoint{}}
	name := vm.VM + standbySuffix
	vm.Directory = fmt.Sprintf("[%s] %s", repl.Storage[datastoreOf(p)], name)
	res, ps, err := s.runVSphereStandby(ctx, r, repl, p, name)
	if err != nil {
		vm.Error = err.Error()
		t.Log(slog.LevelError, "the vSphere standby was not brought to the newest point", "vm", vm.VM, "point", p.ID.String(), "err", err)
		return vm
	}
	vm.UpToDate = res.UpToDate
	if !res.UpToDate {
		vm.BytesWritten = res.Point.BytesWritten
	}
	for _, pt := range ps {
		vm.Points = append(vm.Points, api.ReplicaPoint{Seq: pt.Seq, BackupPoint: pt.BackupPoint, SourceTime: pt.SourceTime,
			ReplicatedAt: pt.ReplicatedAt, BytesWritten: pt.BytesWritten})
	}
	t.Log(slog.LevelInfo, "the vSphere standby equals the newest point", "vm", vm.VM, "standby", name, "point", p.ID.String(),
		"up_to_date", res.UpToDate, "bytes_written", vm.BytesWritten, "seq", res.Point.Seq)
	return vm
}

func (s Ops) runVSphereStandby(ctx context.Context, r *repo.Repository, repl policy.Replication, p *repo.Point, name string) (*vsstandby.Result, []vsstandby.Point, error) {
	cfg, err := s.EngineConfig(ctx)
	if err != nil {
		return nil, nil, err
	}
	conns, err := s.OpenConnectors(ctx, cfg, []string{repl.Connection})
	if err != nil {
		return nil, nil, err
	}
	defer conns.Close()
	conn, ok := conns.Conns[repl.Connection].(vsphereDR)
	if !ok {
		return nil, nil, fmt.Errorf("connection %s cannot keep a vSphere standby here", repl.Connection)
	}
	res, err := vsstandby.Run(ctx, conn, r, p, vsstandby.Options{Name: name, Mark: repl.Name + "/" + p.Source.VMName, Keep: repl.KeepOrDefault(),
		Networks: repl.Networks, Datastores: repl.Storage, StateDir: conn.InstantStateDir(), Log: s.Logger()})
	if err != nil {
		return nil, nil, err
	}
	ps, err := vsstandby.Points(ctx, conn.Client(), name)
	return res, ps, err
}

// isVSphereDR says whether the replication's DR site is a vSphere one.
func (s Ops) isVSphereDR(ctx context.Context, repl policy.Replication) bool {
	cfg, err := s.EngineConfig(ctx)
	if err != nil {
		return false
	}
	cc, ok := cfg.Connection(repl.Connection)
	return ok && cc.Kind == "vsphere"
}

// attachVSphere gives each VM of fp its standby VM on the replication's
// vSphere DR site (replicateVSphere named and marked it), which a
// failover starts through vCenter. The returned func closes the
// connection, after the operation.
func (s Ops) attachVSphere(ctx context.Context, repl policy.Replication, fp *failover.Plan) (func(), error) {
	cfg, err := s.EngineConfig(ctx)
	if err != nil {
		return nil, err
	}
	conns, err := s.OpenConnectors(ctx, cfg, []string{repl.Connection})
	if err != nil {
		return nil, err
	}
	conn, ok := conns.Conns[repl.Connection].(vsphereDR)
	if !ok {
		conns.Close()
		return nil, fmt.Errorf("connection %s cannot start a vSphere standby here", repl.Connection)
	}
	for gi := range fp.Groups {
		for i := range fp.Groups[gi].VMs {
			vm := &fp.Groups[gi].VMs[i]
			vm.Remote = vsstandby.Standby{Client: conn.Client(), Name: vm.Name + standbySuffix, Mark: repl.Name + "/" + vm.Name,
				Connection: repl.Connection, DR: conn, Keep: repl.KeepOrDefault(), StateDir: conn.InstantStateDir()}
		}
	}
	return conns.Close, nil
}

// vsphereNewLocationRefusal refuses, before any job starts, a failback
// to a new location of a plan of vSphere standbys.
func vsphereNewLocationRefusal() error {
	return service.Invalidf("a failback to a new location (--to) of a plan whose standbys are on a vSphere DR site is not supported: " +
		"fail back onto the original VMs, or back the DR VMs up and restore them to new VMs (coffer restore vm)")
}

// vsphereStandbyStates reads whether each standby of fp is failed over
// from the standby VM's own record, through vCenter.
func (s Ops) vsphereStandbyStates(ctx context.Context, repl policy.Replication, fp failover.Plan) []api.FailoverStandby {
	out := []api.FailoverStandby{}
	closeConn, err := s.attachVSphere(ctx, repl, &fp)
	if err == nil {
		defer closeConn()
	}
	for gi, g := range fp.Groups {
		for _, vm := range g.VMs {
			sb := api.FailoverStandby{VM: vm.Name, Group: gi + 1}
			if st, ok := vm.Remote.(vsstandby.Standby); err != nil || !ok {
				sb.Unknown = fmt.Sprintf("connection %s: %v", repl.Connection, err)
			} else if seq, since, on, ferr := vsstandby.FailedOver(ctx, st.Client, st.Name); ferr != nil {
				sb.Unknown = ferr.Error()
			} else if on {
				sb.FailedOver, sb.Seq, sb.Since = true, seq, since
			}
			out = append(out, sb)
		}
	}
	return out
}
