package restoreops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/crossrestore"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/service"
)

// emulatedHost is a connection that says whether its host runs guests
// under TCG only (libvirt).
type emulatedHost interface {
	GuestsEmulated(ctx context.Context) (bool, error)
}

// qemuHost is the target of a restore into a directory of this host: a
// QEMU VM.
type qemuHost struct{ hypervisor.Connector }

func (qemuHost) Kind() string { return "qemu" }

// crossPlan maps a point's VM onto connection c's platform, which is not
// the point's: the plan says how, and its report what it cannot map.
func crossPlan(ctx context.Context, c hypervisor.Connector, snap *repo.Point, cfg hypervisor.VMConfig, in restoreVMInput) (*crossrestore.Plan, error) {
	if in.OntoOriginal {
		return nil, service.Invalidf("backup point %s is of a %s VM: it cannot be restored onto an original %s VM; "+
			"restore it as a new VM", snap.ID.Short(), cfg.Kind, c.Kind())
	}
	o := crossrestore.Options{Network: in.Network}
	if e, ok := c.(emulatedHost); ok {
		emulated, err := e.GuestsEmulated(ctx)
		if err != nil {
			return nil, err
		}
		o.Emulated = emulated
	}
	plan, err := crossrestore.Map(cfg, c.Kind(), o)
	if errors.Is(err, hypervisor.ErrUnsupported) {
		return nil, service.Invalidf("backup point %s: %v", snap.ID.Short(), err)
	}
	if err != nil {
		return nil, err
	}
	for _, d := range snap.Disks {
		if d.Kind == hypervisor.KindMemory {
			plan.Report.Unmapped = append(plan.Report.Unmapped, crossrestore.Item{Kind: "memory-state", Name: d.Name, From: cfg.Kind + " memory state",
				Note: "a VM's memory state runs only on its own platform: the restored VM boots"})
		}
	}
	return plan, nil
}

// mappingOf is a plan's report as the API gives it.
func mappingOf(r crossrestore.Report) *api.VMMapping {
	items := func(in []crossrestore.Item) []api.MappingItem {
		out := make([]api.MappingItem, 0, len(in))
		for _, i := range in {
			out = append(out, api.MappingItem(i))
		}
		return out
	}
	return &api.VMMapping{From: r.From, To: r.To, Mapped: items(r.Mapped), Unmapped: items(r.Unmapped), Needs: append([]string{}, r.Needs...)}
}

// dryRunVM is a restore that only reports its mapping.
func (s Ops) dryRunVM(ctx context.Context, in restoreVMInput) (*api.RestoredVM, error) {
	pt, cfg, err := s.openVMPoint(ctx, in.Point)
	if err != nil {
		return nil, err
	}
	defer pt.Release()
	tg, err := s.vmRestorer(ctx, pt, cfg, in)
	if err != nil {
		return nil, err
	}
	defer tg.done()
	return &api.RestoredVM{PointID: pt.Point.ID.String(), OriginalVM: cfg.Name, Connection: in.Connection, VM: tg.opts.Name,
		Disks: []string{}, Warnings: []string{}, Mapping: mappingOf(tg.plan.Report), DryRun: true}, nil
}

// logMapping puts a mapping's report into the task log before the
// restore starts.
func logMapping(t service.Job, r crossrestore.Report) {
	t.Log(slog.LevelInfo, fmt.Sprintf("restoring a %s VM as a %s VM", r.From, r.To))
	for _, i := range r.Mapped {
		t.Log(slog.LevelInfo, fmt.Sprintf("mapped %s %s: %s -> %s", i.Kind, i.Name, i.From, i.To), "note", i.Note)
	}
	for _, i := range r.Unmapped {
		t.Log(slog.LevelWarn, fmt.Sprintf("not mapped: %s %s (%s): %s", i.Kind, i.Name, i.From, i.Note))
	}
	for _, n := range r.Needs {
		t.Log(slog.LevelWarn, "the guest needs: "+n)
	}
}
