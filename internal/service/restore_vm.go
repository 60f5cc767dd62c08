package service

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/restore/qcow2"
	"github.com/coffer-backup/coffer/internal/task"
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
func (s *Service) RestoreVM(ctx context.Context, call *api.RestoreVMInput) (*api.RestoredVM, error) {
	in := restoreVMInput{RestoreVMRequest: call.Body, Point: call.Point, Connection: call.Connection}
	if in.Connection == "" {
		var err error
		if in.Dir, err = s.hostPath(s.cfg.Files.RestoreDir, restoreDir, in.Dir); err != nil {
			return nil, err
		}
	}
	if in.Format == "" {
		in.Format = "qcow2"
	}
	if in.Format != "raw" && in.Format != "qcow2" {
		return nil, invalidf("--format must be raw or qcow2, not %q", in.Format)
	}
	return run(ctx, s, s.pointTask(task.KindRestoreVM, in.Point), func(ctx context.Context, t Task) (*api.RestoredVM, error) {
		pt, err := s.openPoint(ctx, in.Point, "restore vm "+in.Point)
		if err != nil {
			return nil, err
		}
		defer pt.release()
		var cfg hypervisor.VMConfig
		if err := json.Unmarshal(pt.snap.VMConfig, &cfg); err != nil || cfg.Kind == "" {
			return nil, invalidf("backup point %s has no recorded VM configuration: restore its disks with `coffer restore`", pt.snap.ID.Short())
		}
		if in.Connection != "" {
			return s.restoreVMOnConnection(ctx, t, pt, cfg, in)
		}
		if in.OntoOriginal {
			// A QEMU VM's disks are files its command line names: the
			// original's are restored with restore-disk --overwrite, never
			// silently as a new VM the caller did not ask for.
			return nil, invalidf("a QEMU VM is restored as a new VM: restore the original's disks onto its files with `coffer restore --overwrite`")
		}
		return s.restoreQEMUVM(ctx, t, pt, cfg, in)
	})
}

// restoreQEMUVM restores every disk of a QEMU point into a directory and
// reproduces the VM from the command line recorded at backup time, with
// a new name, UUID and MAC addresses; it starts it if asked.
func (s *Service) restoreQEMUVM(ctx context.Context, t Task, pt *point, cfg hypervisor.VMConfig, in restoreVMInput) (*api.RestoredVM, error) {
	snap := pt.snap
	if cfg.Kind != "qemu" {
		return nil, invalidf("backup point %s is of a %s VM: restore it with --connection NAME", snap.ID.Short(), cfg.Kind)
	}
	if in.Dir == "" {
		return nil, invalidf("a QEMU VM is restored into a directory: --to DIR")
	}
	if err := qemu.Relaunchable(cfg.Native); err != nil {
		return nil, invalidf("backup point %s: %v", snap.ID.Short(), err)
	}
	dir, err := filepath.Abs(in.Dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	name := in.Name
	if name == "" {
		name = cfg.Name + "-restored"
	}
	spec := qemu.LaunchSpec{Dir: dir, Name: name, UUID: newUUID(), Disks: map[string]qemu.LaunchDisk{}, NewMAC: newMAC}
	res := &api.RestoredVM{PointID: snap.ID.String(), VM: name, OriginalVM: cfg.Name, VMID: spec.UUID, Dir: dir, QMPSocket: spec.QMPPath(),
		Console: spec.ConsolePath(), Disks: []string{}, Warnings: []string{}}
	for _, d := range snap.Disks {
		if d.Kind == hypervisor.KindMemory {
			res.MemoryState = filepath.Join(dir, "memory.vmstate")
			if _, err := restore.ToFile(ctx, pt.r, snap, d, res.MemoryState, restore.FileOptions{}); err != nil {
				return nil, fmt.Errorf("memory state: %w", err)
			}
			continue
		}
		path := filepath.Join(dir, d.Key+"."+in.Format)
		t.Log(slog.LevelInfo, fmt.Sprintf("restoring disk %s (%d bytes) to %s", d.Name, d.Size, path))
		if err := s.restoreDiskAs(ctx, pt.r, snap, d, path, in.Format); err != nil {
			return nil, fmt.Errorf("disk %s: %w", d.Key, err)
		}
		spec.Disks[d.Key] = qemu.LaunchDisk{Path: path, Format: in.Format}
		res.Disks = append(res.Disks, path)
	}
	spec.Incoming = in.Start && res.MemoryState != "" && !in.ColdBoot
	rl, err := qemu.RelaunchArgs(cfg.Native, spec)
	if err != nil {
		return nil, err
	}
	res.Warnings = append(res.Warnings, rl.Warnings...)
	res.LaunchScript = filepath.Join(dir, "launch.sh")
	script := rl
	if spec.Incoming { // the script boots; resuming from memory is this operation's job
		cold := spec
		cold.Incoming = false
		if script, err = qemu.RelaunchArgs(cfg.Native, cold); err != nil {
			return nil, err
		}
	}
	if err := writeLaunchScript(res.LaunchScript, script.Args); err != nil {
		return nil, err
	}
	// The log says where the VM is: a face that shows the task rather
	// than the answer (the console) shows this.
	t.Log(slog.LevelInfo, fmt.Sprintf("restored as the new VM %s (UUID %s) in %s; it starts with %s", name, spec.UUID, dir, res.LaunchScript))
	if in.Start {
		if res.PID, err = qemu.Launch(ctx, rl.Args, spec); err != nil {
			return nil, err
		}
		res.Started = true
		t.Log(slog.LevelInfo, fmt.Sprintf("started %s: process %d, serial console %s, QMP %s", name, res.PID, res.Console, res.QMPSocket))
		if spec.Incoming {
			if err := qemu.LoadMemory(ctx, spec.QMPPath(), res.MemoryState); err != nil {
				return nil, err
			}
			res.ResumedFromMemory = true
		}
	}
	return res, nil
}

// logRoutes puts the lines a restored VM has added since the first
// logged into the task log: which way each disk's bytes went (vSphere: to
// the ESXi host, or through vCenter). It returns how many are logged.
func logRoutes(t Task, nv hypervisor.NewVM, logged int) int {
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

// restoreDiskAs restores one disk in the given format.
func (s *Service) restoreDiskAs(ctx context.Context, r *repo.Repository, snap *repo.Point, d repo.Disk, path, format string) error {
	if format == "qcow2" {
		return qcow2.Write(ctx, r, d, path, s.log)
	}
	_, err := restore.ToFile(ctx, r, snap, d, path, restore.FileOptions{})
	return err
}

// writeLaunchScript records the command line that starts the restored VM.
func writeLaunchScript(path string, args []string) error {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# Starts the VM restored by coffer (daemonized; see qemu.pid, console.log, qmp.sock).\nexec")
	for _, a := range args {
		b.WriteString(" '" + strings.ReplaceAll(a, "'", `'\''`) + "'")
	}
	b.WriteString("\n")
	return os.WriteFile(path, []byte(b.String()), 0o755)
}

func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// newMAC returns a random locally administered unicast MAC address.
func newMAC() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	b[0] = b[0]&0xfc | 0x02
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4], b[5])
}

// restoreCacheBytes bounds the chunk cache of each disk being uploaded: the
// connector reads a disk in order, so a few chunks ahead are enough.
const restoreCacheBytes = 64 << 20

// restoreVMOnConnection restores a backup point through a hypervisor
// connection of the configuration (vSphere today): the connector creates
// the VM from the configuration recorded at backup time (or, with
// OntoOriginal and its confirmation, takes the powered-off original) and
// each disk's allocated ranges stream into it straight from the
// repository. A half-restored new VM is deleted when anything fails.
func (s *Service) restoreVMOnConnection(ctx context.Context, t Task, pt *point, cfg hypervisor.VMConfig, in restoreVMInput) (*api.RestoredVM, error) {
	snap := pt.snap
	if in.OntoOriginal && !in.ConfirmOverwrite {
		return nil, invalidf("--onto-original overwrites the disks of VM %s with backup point %s: add --yes-overwrite-original to confirm", cfg.Name, snap.ID.Short())
	}
	pc, err := s.engineConfig(ctx)
	if err != nil {
		return nil, err
	}
	conns, err := s.openConnectors(ctx, pc, []string{in.Connection})
	if err != nil {
		return nil, err
	}
	defer conns.close()
	c := conns.conns[in.Connection]
	if c.Kind() != cfg.Kind {
		return nil, invalidf("backup point %s is of a %s VM; connection %s is %s", snap.ID.Short(), cfg.Kind, in.Connection, c.Kind())
	}
	restorer, ok := c.(hypervisor.Restorer)
	if !ok {
		return nil, invalidf("connection %s (%s) cannot create VMs", in.Connection, c.Kind())
	}
	name := in.Name
	if name == "" && !in.OntoOriginal {
		name = cfg.Name + "-restored"
	}
	// DiskFormat: libvirt writes qcow2 or raw files; vSphere ignores it.
	nv, err := restorer.CreateVM(ctx, cfg, hypervisor.NewVMOptions{Name: name, Datastore: in.Datastore, DiskFormat: in.Format, ReplaceExisting: in.OntoOriginal})
	if err != nil {
		return nil, err
	}
	res := &api.RestoredVM{PointID: snap.ID.String(), OriginalVM: cfg.Name, Connection: in.Connection, VM: nv.Ref().Name, VMID: nv.Ref().ID,
		OntoOriginal: in.OntoOriginal, Disks: []string{}, Warnings: []string{}}
	fail := func(err error) (*api.RestoredVM, error) {
		// Abort deletes a VM this operation created; on the original it
		// only releases what the restore held.
		if aerr := nv.Abort(context.WithoutCancel(ctx)); aerr != nil {
			t.Log(slog.LevelWarn, "could not remove the half-restored VM", "vm", res.VM, "err", aerr)
		}
		return nil, err
	}
	logged := 0 // route lines already in the task log
	for _, d := range snap.Disks {
		if d.Kind == hypervisor.KindMemory {
			res.Warnings = append(res.Warnings, "the point holds the VM's memory state; this connection restores disks only, so the VM boots")
			continue
		}
		src, err := restore.OpenDisk(ctx, pt.r, d, restore.CacheChunks(restoreCacheBytes, d.ChunkSize))
		if err != nil {
			return fail(err)
		}
		t.Log(slog.LevelInfo, "writing disk", "vm", res.VM, "disk", d.Name, "bytes", d.Size)
		err = nv.WriteDisk(ctx, d.Key, src)
		logged = logRoutes(t, nv, logged)
		if err != nil {
			return fail(fmt.Errorf("disk %s: %w", d.Name, err))
		}
		res.Disks = append(res.Disks, d.Name)
	}
	if w, ok := nv.(interface{ Warnings() []string }); ok { // a disk's fallback route
		for _, m := range w.Warnings() {
			t.Log(slog.LevelWarn, m)
			res.Warnings = append(res.Warnings, m)
		}
	}
	if in.Start {
		if err := nv.Start(ctx); err != nil {
			return nil, err
		}
		res.Started = true
	}
	return res, nil
}
