package restoreops

import (
	"cmp"
	"context"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/service"
)

// workerChooser is the fleet's choice of a worker for work a request
// does not place itself (fleet.Remote, the process's service.Remote on a
// server with workers): see fleet.Remote.ChooseWorker.
type workerChooser interface {
	ChooseWorker(ctx context.Context, rt engine.Route, optional bool) (string, error)
}

// chooser is the process's worker chooser, nil without a fleet (the
// command line, a SQLite catalog, a worker running a hand-off).
func (s Ops) chooser() workerChooser {
	c, _ := s.RemoteRunner().(workerChooser)
	return c
}

// toVMsHost names in w, when the request names no worker, the worker of
// the host of the VM whose point ref is, if one is ready: a restore to a
// path (a disk, a QEMU VM's directory, extracted files) is written
// beside the VM. Where none is ready it runs here, as without a fleet.
func (s Ops) toVMsHost(ctx context.Context, w *api.WorkerParam, ref string) error {
	c := s.chooser()
	if c == nil || w.Worker != "" {
		return nil
	}
	conn, host, err := s.pointHost(ctx, ref)
	if err != nil || host == "" {
		return err
	}
	w.Worker, err = c.ChooseWorker(ctx, engine.Route{Connection: conn, Hosts: []string{host}}, true)
	return err
}

// ontoConnection names in w, when the request names no worker, the
// worker that restores point ref onto connection conn, if the
// connection is the workers': the worker of the target host for a
// connection whose VMs are bound to their host (the connection's host
// option, else the VM's own host when the point is of that connection),
// else any ready worker reaching it, the least busy. None ready is an
// error naming why: the server never opens a workers' connection.
func (s Ops) ontoConnection(ctx context.Context, w *api.WorkerParam, ref, conn string) error {
	c := s.chooser()
	if c == nil || w.Worker != "" || conn == "" {
		return nil
	}
	cfg, err := s.EngineConfig(ctx)
	if err != nil {
		return err
	}
	host := connectionHost(cfg, conn)
	if host == "" {
		if pointConn, vmHost, err := s.pointHost(ctx, ref); err == nil && pointConn == conn {
			host = vmHost
		}
	}
	rt := engine.RouteOf(cfg, policy.Policy{}, conn, hypervisor.VM{Host: host})
	if len(rt.Hosts) == 1 && rt.Hosts[0] == "" {
		rt.Hosts = nil // the host is not known: any worker reaching the connection
	}
	rt.Repository = ""
	w.Worker, err = c.ChooseWorker(ctx, rt, false)
	return err
}

// connectionHost is the host option of a connection (libvirt's, QEMU's):
// the host it names its VMs' host by.
func connectionHost(cfg *policy.Config, conn string) string {
	cc, ok := cfg.Connection(conn)
	if !ok {
		return ""
	}
	var o struct {
		Host string `yaml:"host"`
	}
	if cc.Options.Decode(&o) != nil {
		return ""
	}
	return o.Host
}

// pointHost is the connection and host of the VM of point ref: the host
// the inventory lists it on now, else the one its backup ran on (the
// task of the point's job). A point of no VM (a disk image) has neither.
func (s Ops) pointHost(ctx context.Context, ref string) (conn, host string, err error) {
	r, release, err := s.Open(ctx, service.DefaultRepo(), service.NoLease)
	if err != nil {
		return "", "", err
	}
	defer release()
	snap, err := r.FindPoint(ctx, ref)
	if err != nil {
		return "", "", err
	}
	conn, vm := snap.Source.Connection, snap.Source.VMID
	if conn == "" || vm == "" {
		return conn, "", nil
	}
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		return conn, "", err
	}
	defer cat.Close()
	vms, err := cat.ListInventory(ctx, catalog.InventoryFilter{VMs: []catalog.VMRef{{Connection: conn, ID: vm}}, Brief: true})
	if err == nil && len(vms) == 1 && vms[0].Host != "" {
		return conn, vms[0].Host, nil
	}
	pts, err := cat.ListBackupPoints(ctx, catalog.BackupPointFilter{VMID: vm, Limit: 50})
	if err != nil {
		return conn, "", err
	}
	for _, p := range pts {
		if p.ID != snap.ID.String() || p.JobID == 0 {
			continue
		}
		tasks, err := cat.ListTasks(ctx, catalog.TaskFilter{JobID: p.JobID, VMID: vm})
		if err == nil && len(tasks) > 0 {
			return conn, tasks[len(tasks)-1].Host, nil
		}
	}
	return conn, "", nil
}

// toBootWorker names in w, when the request names no worker, a ready
// worker that can run QEMU (--can-boot) and reaches the repository, the
// least busy, as the schedules' verifications go to one; with none ready
// the verification boots here, as without a fleet.
func (s Ops) toBootWorker(ctx context.Context, w *api.WorkerParam, repository string) error {
	c := s.chooser()
	if c == nil || w.Worker != "" {
		return nil
	}
	var err error
	w.Worker, err = c.ChooseWorker(ctx, engine.Route{Boot: true, Repository: cmp.Or(repository, service.DefaultRepositoryName)}, true)
	return err
}

// placeVM names the worker of a restore as a VM that names none: onto a
// connection, that connection's (ontoConnection); into a directory (a
// QEMU VM), the VM's host's (toVMsHost).
func (s Ops) placeVM(ctx context.Context, call *api.RestoreVMInput) error {
	if call.Connection != "" {
		return s.ontoConnection(ctx, &call.WorkerParam, call.Point, call.Connection)
	}
	return s.toVMsHost(ctx, &call.WorkerParam, call.Point)
}
