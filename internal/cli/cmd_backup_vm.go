package cli

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
)

func init() { backupSubcommands = append(backupSubcommands, (*app).cmdBackupVM) }

type backupVMOptions struct {
	mode, snapshotMode, quiesce, immutable string
	tags                                   []string
	connections                            int
}

func (a *app) cmdBackupVM() *cobra.Command {
	var o backupVMOptions
	cmd := &cobra.Command{
		Use:   "vm QMP-SOCKET",
		Short: "back up a running QEMU/KVM virtual machine through its QMP monitor",
		Long: `Back up every disk of a running QEMU VM at one instant, without an agent in
the guest and without stopping it (the VM is paused for a few milliseconds
while its disks switch to copy-before-write snapshots).

The VM needs a QMP monitor dedicated to coffer on its command line:

  -chardev socket,id=coffer,path=/run/coffer/vm1.qmp,server=on,wait=off
  -mon chardev=coffer,mode=control

and, for --snapshot-mode quiesced, qemu-guest-agent in the guest with its
channel at the matching path (vm1.qmp -> vm1.qga, qmp.sock -> qga.sock).

The first backup is full; later ones read only the blocks QEMU's
persistent dirty bitmaps recorded (incremental, the default) or everything
since the last full (differential). Whatever coffer created on the VM is
released at the end; leftovers of a killed coffer are removed at the next
start.`,
		Example: "  coffer backup vm /run/coffer/web-1.qmp --snapshot-mode quiesced",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runBackupVM(cmd, args[0], o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.mode, "mode", "incremental", "full, incremental or differential (the first backup is always full)")
	f.StringVar(&o.snapshotMode, "snapshot-mode", "crash-consistent", "crash-consistent, quiesced, with-memory, suspend or as-is (the point records what was achieved)")
	f.StringVar(&o.quiesce, "quiesce", "fallback", "when the guest agent cannot quiesce: fallback (warn) or required (fail)")
	f.StringArrayVar(&o.tags, "tag", nil, "tag KEY=VALUE (repeatable)")
	f.StringVar(&o.immutable, "immutable-for", "", "make the backup point undeletable for this long on storage with object lock")
	f.IntVar(&o.connections, "nbd-connections", 4, "parallel NBD connections per disk")
	return cmd
}

func (a *app) runBackupVM(cmd *cobra.Command, socket string, o backupVMOptions) error {
	ctx := cmd.Context()
	switch o.mode {
	case "full", "incremental", "differential":
	default:
		return usagef("--mode must be full, incremental or differential, not %q", o.mode)
	}
	sm := hypervisor.SnapshotMode(o.snapshotMode)
	switch sm {
	case hypervisor.CrashConsistent, hypervisor.Quiesced, hypervisor.Suspend, hypervisor.AsIs, hypervisor.WithMemory:
	default:
		return usagef("unknown --snapshot-mode %q", o.snapshotMode)
	}
	if o.quiesce != "fallback" && o.quiesce != "required" {
		return usagef("--quiesce must be fallback or required")
	}
	tags, err := parseTags(o.tags)
	if err != nil {
		return err
	}
	retain, err := retainUntil(o.immutable)
	if err != nil {
		return err
	}
	conn, err := qemu.New(qemu.Config{Sockets: []string{socket}, StateDir: filepath.Join(a.res.Path("state-dir"), "qemu"),
		Connections: o.connections, Log: a.log})
	if err != nil {
		return err
	}
	if left, err := conn.CleanupLeftovers(ctx); err != nil {
		a.log.Warn("cleanup of earlier sessions failed", "err", err)
	} else {
		for _, l := range left {
			a.log.Info("cleaned up leftover of a killed coffer", "vm", l.VM.Name, "kind", l.Kind, "name", l.Name, "action", l.Action)
		}
	}
	vms, err := conn.Inventory(ctx)
	if err != nil {
		return err
	}
	if len(vms) == 0 {
		return fmt.Errorf("%w: no VM answers on %s (is the monitor in use by another client?)", hypervisor.ErrNotFound, socket)
	}
	vm := vms[0]
	r, err := a.openRepo(ctx)
	if err != nil {
		return err
	}
	if !retain.IsZero() && !r.Store().Properties().Retention {
		return usagef("--immutable-for needs storage with retention (S3 Object Lock); %s has none", r.Store().Properties().Location)
	}
	w, err := r.NewWriter(ctx, "backup vm "+vm.Name)
	if err != nil {
		return err
	}
	prog := &backup.Progress{}
	bar := a.startProgress("backup "+vm.Name, func() int64 { return vm.ProvisionedBytes() }, prog.BytesDone.Load,
		func() string { return stored(prog.BytesNew.Load()) })
	start := time.Now()
	snap, err := backup.BackupVM(ctx, w, conn, backup.VMRequest{
		Connection: "qemu:" + socket, VM: vm.VMRef, Mode: o.mode, SnapshotMode: sm,
		Quiesce: hypervisor.QuiescePolicy(o.quiesce), Tags: tags, RetainUntil: retain,
	}, backup.Options{Progress: prog})
	bar.finish()
	cerr := w.Close(ctx)
	if err != nil {
		return err
	}
	if cerr != nil {
		return cerr
	}
	a.recordPoint(ctx, r, snap)
	return a.reportBackup(snap, time.Since(start))
}
