package replicaops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/failover"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/replica/vsstandby"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/service"
)

// sourceOf finds the VM a backup point was taken of, through the
// connection it names: a vSphere standby's planned failover shuts it
// down and reads it, its failback writes onto it.
func (s Ops) sourceOf(ctx context.Context, r *repo.Repository, point string, conns map[string]*service.Connectors) (*vsstandby.Source, error) {
	p, err := r.FindPoint(ctx, point)
	if err != nil {
		return nil, err
	}
	name := p.Source.Connection
	if name == "" || p.Source.VMID == "" {
		return nil, fmt.Errorf("backup point %s names no connection and VM ID of its source", p.ID.Short())
	}
	cs := conns[name]
	if cs == nil {
		cfg, err := s.EngineConfig(ctx)
		if err != nil {
			return nil, err
		}
		if cs, err = s.OpenConnectors(ctx, cfg, []string{name}); err != nil {
			return nil, fmt.Errorf("the source's connection %s: %w", name, err)
		}
		conns[name] = cs
	}
	conn, ok := cs.Conns[name].(vsstandby.DiskConn)
	if !ok {
		return nil, fmt.Errorf("the source's connection %s is not a vSphere connection: a vSphere standby's planned failover and failback read and write its source VM's disks through vCenter", name)
	}
	return &vsstandby.Source{Conn: conn, VM: p.Source.VMID}, nil
}

// closeAll closes the connections sourceOf opened.
func closeAll(conns map[string]*service.Connectors) func() {
	return func() {
		for _, c := range conns {
			c.Close()
		}
	}
}

// attachVSphereSources gives each vSphere standby of fp the source VM of
// its final point (final[VM]) for its planned failover. The returned
// func closes the sources' connections, after the operation.
func (s Ops) attachVSphereSources(ctx context.Context, r *repo.Repository, fp *failover.Plan, final map[string]string) (func(), error) {
	conns := map[string]*service.Connectors{}
	for gi := range fp.Groups {
		for i := range fp.Groups[gi].VMs {
			vm := &fp.Groups[gi].VMs[i]
			st, ok := vm.Remote.(vsstandby.Standby)
			if !ok || final[vm.Name] == "" {
				continue
			}
			src, err := s.sourceOf(ctx, r, final[vm.Name], conns)
			if err != nil {
				closeAll(conns)()
				return nil, fmt.Errorf("the source of %s: %w", vm.Name, err)
			}
			st.Source = src
			vm.Remote = st
		}
	}
	return closeAll(conns), nil
}

// failbackVSphere fails each failed-over vSphere standby of the plan
// back onto its original VM (vsstandby.Failback), group by group.
func (s Ops) failbackVSphere(ctx context.Context, t service.Job, out *api.FailoverRun, fp failover.Plan, repl policy.Replication) (*api.FailoverRun, error) {
	conns := map[string]*service.Connectors{}
	defer closeAll(conns)()
	err := withRepo(ctx, s, repl, func(r *repo.Repository) error {
		for gi, g := range fp.Groups {
			for _, vm := range g.VMs {
				if err := s.failbackStandby(ctx, t, out, r, gi+1, vm, conns); err != nil {
					return err
				}
			}
		}
		return nil
	})
	out.Passed = err == nil
	out.Seconds = time.Since(out.Started).Seconds()
	return out, err
}

func (s Ops) failbackStandby(ctx context.Context, t service.Job, out *api.FailoverRun, r *repo.Repository, group int, vm failover.VM, conns map[string]*service.Connectors) error {
	st, ok := vm.Remote.(vsstandby.Standby)
	if !ok {
		return fmt.Errorf("%s: not a vSphere standby", vm.Name)
	}
	pt, on, err := vsstandby.FailoverPoint(ctx, st.Client, st.Name)
	if err != nil {
		return fmt.Errorf("%s: %w", vm.Name, err)
	}
	if !on {
		t.Log(slog.LevelInfo, "not failed over: nothing to fail back", "vm", vm.Name)
		return nil
	}
	w := jobWatcher{t}
	step := func(name string, began time.Time, err error, detail string) {
		d := api.FailoverStep{Group: group, VM: vm.Name, Name: name, Seconds: time.Since(began).Seconds(), Detail: detail}
		if err != nil {
			d.Error = err.Error()
		}
		w.step(d)
	}
	src, err := s.sourceOf(ctx, r, pt.BackupPoint, conns)
	if err != nil {
		step("failback", time.Now(), err, "")
		return fmt.Errorf("the original of %s: %w", vm.Name, err)
	}
	res, err := vsstandby.Failback(ctx, vsstandby.FailbackOptions{DR: st.DR, Original: *src, Name: st.Name, Mark: st.Mark,
		StateDir: st.StateDir, Step: step})
	if res != nil {
		out.Failback = append(out.Failback, api.FailbackVM{VM: vm.Name, Mode: "compare", BytesRead: res.BytesRead, BytesWritten: res.BytesWritten})
	}
	if errors.Is(err, vsstandby.ErrNotFailedOver) {
		return nil // failed back by another run meanwhile
	}
	return err
}
