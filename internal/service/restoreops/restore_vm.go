package restoreops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/crossrestore"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/restore/qcow2"
)

// restoreVMInput says where a backup point becomes a VM again: into a
// directory of this host (QEMU: Dir) or through a hypervisor connection
// of the configuration (Connection).
type restoreVMInput struct {
	api.RestoreVMRequest
	Point, Connection string
}

// RestoreVM restores a backup point of the default repository as a VM,
// under a restore lease.
func (s Ops) RestoreVM(ctx context.Context, call *api.RestoreVMInput) (*api.RestoredVM, error) {
	if err := s.placeVM(ctx, call); err != nil {
		return nil, err
	}
	if out, remote, err := service.OnWorker[*api.RestoredVM](ctx, s.Service, "restore-vm", &call.WorkerParam, call,
		s.PointJob(job.KindRestoreVM, call.Point)); remote {
		return out, err
	}
	in := restoreVMInput{RestoreVMRequest: call.Body, Point: call.Point, Connection: call.Connection}
	if in.Connection == "" {
		var err error
		if in.Dir, err = s.HostPath(s.Config.Files.RestoreDir, service.RestoreDir, in.Dir); err != nil {
			return nil, err
		}
	}
	if in.Format == "" {
		in.Format = "qcow2"
	}
	if in.Format != "raw" && in.Format != "qcow2" {
		return nil, service.Invalidf("--format must be raw or qcow2, not %q", in.Format)
	}
	if in.DryRun {
		// The mapping only: no task, nothing restored.
		return s.dryRunVM(ctx, in)
	}
	return service.Run(ctx, s.Service, s.PointJob(job.KindRestoreVM, in.Point), func(ctx context.Context, t service.Job) (*api.RestoredVM, error) {
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
		return s.restoreVM(ctx, t, pt, cfg, in, tg)
	})
}

// openVMPoint opens a point with the VM configuration it recorded.
func (s Ops) openVMPoint(ctx context.Context, ref string) (*service.OpenedPoint, hypervisor.VMConfig, error) {
	var cfg hypervisor.VMConfig
	pt, err := s.OpenPoint(ctx, ref, "restore vm "+ref)
	if err != nil {
		return nil, cfg, err
	}
	if err := json.Unmarshal(pt.Point.VMConfig, &cfg); err != nil || cfg.Kind == "" {
		pt.Release()
		return nil, cfg, service.Invalidf("backup point %s has no recorded VM configuration: restore its disks with `coffer restore`", pt.Point.ID.Short())
	}
	return pt, cfg, nil
}

// vmTarget is what creates the VM, how, and (onto another platform
// than the point's) the mapping of its hardware; done releases it (a
// connector's session).
type vmTarget struct {
	restorer hypervisor.Restorer
	opts     hypervisor.NewVMOptions
	done     func()
	plan     *crossrestore.Plan
}

// vmRestorer is what creates the VM: the connector of the connection
// named, or, without one, QEMU's restore into a directory.
func (s Ops) vmRestorer(ctx context.Context, pt *service.OpenedPoint, cfg hypervisor.VMConfig, in restoreVMInput) (vmTarget, error) {
	restorer, opts, done, plan, err := s.openRestorer(ctx, pt, cfg, in)
	return vmTarget{restorer: restorer, opts: opts, done: done, plan: plan}, err
}

// openRestorer opens the target of vmRestorer.
func (s Ops) openRestorer(ctx context.Context, pt *service.OpenedPoint, cfg hypervisor.VMConfig, in restoreVMInput) (
	restorer hypervisor.Restorer, opts hypervisor.NewVMOptions, done func(), plan *crossrestore.Plan, err error) {
	snap := pt.Point
	name := in.Name
	if name == "" && !in.OntoOriginal {
		name = cfg.Name + "-restored"
	}
	opts = hypervisor.NewVMOptions{Name: name, DiskFormat: in.Format}
	if in.Connection == "" {
		if in.Resume {
			return nil, opts, nil, nil, service.Invalidf("--resume takes up a broken restore through a connection (vSphere); a QEMU restore into a directory starts again")
		}
		if in.OntoOriginal {
			// A QEMU VM's disks are files its command line names: the
			// original's are restored with restore-disk --overwrite, never
			// silently as a new VM the caller did not ask for.
			return nil, opts, nil, nil, service.Invalidf("a QEMU VM is restored as a new VM: restore the original's disks onto its files with `coffer restore --overwrite`")
		}
		if in.Dir == "" {
			return nil, opts, nil, nil, service.Invalidf("a QEMU VM is restored into a directory: --to DIR")
		}
		if cfg.Kind != "qemu" {
			// Another platform's VM as a QEMU VM in the directory.
			plan, err = crossPlan(ctx, qemuHost{}, snap, cfg, in)
			if err != nil {
				return nil, opts, nil, nil, err
			}
			opts.TargetDir, opts.ColdBoot = in.Dir, true
			return qemu.DirRestorer{}, opts, func() {}, plan, nil
		}
		if in.DryRun {
			return nil, opts, nil, nil, service.Invalidf("--dry-run reports how a VM maps onto another platform; backup point %s is of a QEMU VM", snap.ID.Short())
		}
		if err := qemu.Relaunchable(cfg.Native); err != nil {
			return nil, opts, nil, nil, service.Invalidf("backup point %s: %v", snap.ID.Short(), err)
		}
		opts.TargetDir, opts.ColdBoot = in.Dir, in.ColdBoot
		return qemu.DirRestorer{}, opts, func() {}, nil, nil
	}
	if in.OntoOriginal && !in.ConfirmOverwrite {
		return nil, opts, nil, nil, service.Invalidf("--onto-original overwrites the disks of VM %s with backup point %s: add --yes-overwrite-original to confirm", cfg.Name, snap.ID.Short())
	}
	pc, err := s.EngineConfig(ctx)
	if err != nil {
		return nil, opts, nil, nil, err
	}
	conns, err := s.OpenConnectors(ctx, pc, []string{in.Connection})
	if err != nil {
		return nil, opts, nil, nil, err
	}
	c := conns.Conns[in.Connection]
	if c.Kind() != cfg.Kind {
		// Another platform: the VM's hardware mapped onto the target's.
		if plan, err = crossPlan(ctx, c, snap, cfg, in); err != nil {
			conns.Close()
			return nil, opts, nil, nil, err
		}
	} else if in.DryRun {
		conns.Close()
		return nil, opts, nil, nil, service.Invalidf("--dry-run reports how a VM maps onto another platform; backup point %s is of a %s VM, as connection %s is",
			snap.ID.Short(), cfg.Kind, in.Connection)
	}
	restorer, ok := c.(hypervisor.Restorer)
	if !ok {
		conns.Close()
		return nil, opts, nil, nil, service.Invalidf("connection %s (%s) cannot create VMs", in.Connection, c.Kind())
	}
	if in.Resume && c.Kind() != "vsphere" {
		conns.Close()
		return nil, opts, nil, nil, service.Invalidf("--resume takes up a broken vSphere restore; a %s restore starts again", c.Kind())
	}
	// DiskFormat: libvirt writes qcow2 or raw files; vSphere ignores it.
	opts.Datastore, opts.ReplaceExisting = in.Datastore, in.OntoOriginal
	opts.Point, opts.Resume = snap.ID.String(), in.Resume
	// A connector writing disks in ranges keeps to the datastore limit,
	// and takes up a broken write again as backups retry a VM.
	opts.PerDatastore = pc.Limits.WithDefaults().PerDatastore
	rt := policy.Retries{}.WithDefaults()
	opts.Retries = hypervisor.RetryPolicy{Attempts: rt.Attempts, Backoff: rt.Backoff, MaxBackoff: rt.MaxBackoff}
	return restorer, opts, conns.Close, plan, nil
}

// localVM is a VM restored into a directory of this host (QEMU): the
// task log names its disks' files, and the result says where its files
// are.
type localVM interface {
	DiskPath(key string) string
	Files() qemu.RestoredFiles
}

// restoreVM is the one route from a backup point to a VM, whatever the
// platform: the restorer creates the VM from the configuration recorded
// at backup time (or, with OntoOriginal and its confirmation, takes the
// powered-off original), each disk streams into it straight from the
// repository (or is restored into its file, for a VM in a directory),
// and it starts if asked. A half-restored new VM is deleted when
// anything fails.
func (s Ops) restoreVM(ctx context.Context, t service.Job, pt *service.OpenedPoint, cfg hypervisor.VMConfig, in restoreVMInput,
	tg vmTarget) (*api.RestoredVM, error) {
	snap := pt.Point
	create, keys := cfg, map[string]string(nil)
	if tg.plan != nil {
		create, keys = tg.plan.Config, tg.plan.DiskKeys
		logMapping(t, tg.plan.Report)
	}
	nv, err := tg.restorer.CreateVM(ctx, create, tg.opts)
	if err != nil {
		return nil, err
	}
	res := &api.RestoredVM{PointID: snap.ID.String(), OriginalVM: cfg.Name, Connection: in.Connection, VM: nv.Ref().Name, VMID: nv.Ref().ID,
		OntoOriginal: in.OntoOriginal, Disks: []string{}, Warnings: []string{}}
	if tg.plan != nil {
		res.Mapping = mappingOf(tg.plan.Report)
	}
	local, _ := nv.(localVM)
	if err := s.writeVM(ctx, t, pt, nv, local, keys, res); err != nil {
		if k, ok := nv.(hypervisor.Resumer); ok && k.KeepForResume(err) {
			t.Log(slog.LevelWarn, "the restore broke; the half-restored VM stays for --resume", "vm", res.VM, "err", err)
			return nil, fmt.Errorf("%w (the half-restored VM %s stays: run the same restore with --resume to finish it, or delete the VM)", err, res.VM)
		}
		// Abort deletes a VM this operation created; on the original it
		// only releases what the restore held.
		if aerr := nv.Abort(context.WithoutCancel(ctx)); aerr != nil {
			t.Log(slog.LevelWarn, "could not remove the half-restored VM", "vm", res.VM, "err", aerr)
		}
		return nil, err
	}
	if w, ok := nv.(interface{ Warnings() []string }); ok { // a disk's fallback route
		for _, m := range w.Warnings() {
			t.Log(slog.LevelWarn, m)
			res.Warnings = append(res.Warnings, m)
		}
	}
	if local != nil {
		f := local.Files()
		res.Dir, res.QMPSocket, res.Console, res.LaunchScript, res.MemoryState = f.Dir, f.QMPSocket, f.Console, f.LaunchScript, f.MemoryState
		res.Disks, res.Warnings = f.Disks, append(res.Warnings, f.Warnings...)
		// The log says where the VM is: a face that shows the task rather
		// than the answer (the console) shows this.
		t.Log(slog.LevelInfo, fmt.Sprintf("restored as the new VM %s (UUID %s) in %s; it starts with %s", res.VM, res.VMID, res.Dir, res.LaunchScript))
	}
	if in.Start {
		if err := nv.Start(ctx); err != nil {
			return nil, err
		}
		res.Started = true
		if local != nil {
			f := local.Files()
			res.PID, res.ResumedFromMemory = f.PID, f.ResumedFromMemory
			t.Log(slog.LevelInfo, fmt.Sprintf("started %s: process %d, serial console %s, QMP %s", res.VM, res.PID, res.Console, res.QMPSocket))
		}
	}
	return res, nil
}

// writeVM writes every disk of the point (and its memory state, where the
// new VM takes it) into the new VM, and completes it. A VM that writes
// disks in parallel (hypervisor.ParallelWriter) gets them all at once.
func (s Ops) writeVM(ctx context.Context, t service.Job, pt *service.OpenedPoint, nv hypervisor.NewVM, local localVM,
	keys map[string]string, res *api.RestoredVM) error {
	var disks []repo.Disk
	for _, d := range pt.Point.Disks {
		if d.Kind != hypervisor.KindMemory {
			if _, mapped := keys[d.Key]; keys == nil || mapped {
				disks = append(disks, d) // onto another platform, those it maps
			}
			continue
		}
		if keys != nil {
			continue // another platform's memory state: the mapping reports it
		}
		mw, ok := nv.(hypervisor.MemoryWriter)
		if !ok {
			res.Warnings = append(res.Warnings, "the point holds the VM's memory state; this connection restores disks only, so the VM boots")
			continue
		}
		src, err := s.openPointDisk(ctx, pt, d)
		if err == nil {
			err = mw.WriteMemory(ctx, src)
		}
		if err != nil {
			return fmt.Errorf("memory state: %w", err)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	if p, ok := nv.(hypervisor.ParallelWriter); !ok || !p.ParallelDisks() {
		g.SetLimit(1)
	}
	var mu sync.Mutex // the task log's route lines
	logged := 0       // route lines already in the task log
	for _, d := range disks {
		g.Go(func() error {
			src, err := s.openPointDisk(gctx, pt, d)
			if err != nil {
				return err
			}
			disk := d.Name
			if local != nil {
				disk = d.Key
				t.Log(slog.LevelInfo, fmt.Sprintf("restoring disk %s (%d bytes) to %s", d.Name, d.Size, local.DiskPath(d.Key)))
			} else {
				t.Log(slog.LevelInfo, "writing disk", "vm", res.VM, "disk", d.Name, "bytes", d.Size)
			}
			key := d.Key
			if keys != nil {
				key = keys[d.Key]
			}
			err = nv.WriteDisk(gctx, key, src)
			mu.Lock()
			logged = logRoutes(t, nv, logged)
			mu.Unlock()
			if err != nil {
				return fmt.Errorf("disk %s: %w", disk, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, d := range disks {
		res.Disks = append(res.Disks, d.Name)
	}
	if c, ok := nv.(hypervisor.Completer); ok {
		return c.Complete(ctx)
	}
	return nil
}

// logRoutes puts the lines a restored VM has added since the first
// logged into the task log: which way each disk's bytes went (vSphere: to
// the ESXi host, or through vCenter). It returns how many are logged.
func logRoutes(t service.Job, nv hypervisor.NewVM, logged int) int {
	n, ok := nv.(hypervisor.Noter)
	if !ok {
		return logged
	}
	lines := n.Notes()
	for _, line := range lines[min(logged, len(lines)):] {
		t.Log(slog.LevelInfo, line)
	}
	return len(lines)
}

// restoreCacheBytes bounds the chunk cache of each disk being uploaded: the
// connector reads a disk in order, so a few chunks ahead are enough.
const restoreCacheBytes = 64 << 20

// pointDisk is a disk of a backup point as a restore offers it to a
// connector: read through ReadAt (uploaded), or restored straight into an
// image file on this host (hypervisor.FileSource).
type pointDisk struct {
	*restore.DiskReader
	writeFile func(ctx context.Context, path, format string) error
}

// WriteFile implements hypervisor.FileSource.
func (p pointDisk) WriteFile(ctx context.Context, path, format string) error {
	return p.writeFile(ctx, path, format)
}

func (s Ops) openPointDisk(ctx context.Context, pt *service.OpenedPoint, d repo.Disk) (hypervisor.FileSource, error) {
	dr, err := restore.OpenDisk(ctx, pt.Repo, d, restore.CacheChunks(restoreCacheBytes, d.ChunkSize))
	if err != nil {
		return nil, err
	}
	return pointDisk{DiskReader: dr, writeFile: func(ctx context.Context, path, format string) error {
		return s.restoreDiskAs(ctx, pt.Repo, pt.Point, d, path, format)
	}}, nil
}

// restoreDiskAs restores one disk in the given format.
func (s Ops) restoreDiskAs(ctx context.Context, r *repo.Repository, snap *repo.Point, d repo.Disk, path, format string) error {
	if format == "qcow2" {
		return qcow2.Write(ctx, r, d, path, s.Logger())
	}
	_, err := restore.ToFile(ctx, r, snap, d, path, restore.FileOptions{})
	return err
}
