package backupcmd

import (
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/backupops"
)

func (a *app) cmdBackup() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "back up disk images or virtual machines",
		Long: command.Manual(`Back up now, into the repository: disk images or block devices (backup
disk), or a running VM (backup vm): a VM of a configured connection, or a
QEMU VM through its QMP monitor. Fleets are backed up by policies instead
(`+"`coffer run`"+`, `+"`coffer server`"+`). Every backup point is recorded in the catalog
too.`,
			"See the subcommands.",
			`coffer backup disk /var/lib/images/web.raw --name web
coffer backup vm --connection vc1 web-1
coffer backup vm /run/coffer/web-1.qmp --snapshot-mode quiesced`,
			"That of the subcommand."),
	}
	cmd.AddCommand(a.cmdBackupDisk(), a.cmdBackupVM())
	return cmd
}

// backupOutput is what a backup prints.
const backupOutput = `"snapshot ID saved: ..." with what was read, stored and how fast, then its
warnings. --json: the backup point document (see ` + "`coffer help snapshots`" + `).`

func (a *app) cmdBackupDisk() *cobra.Command {
	var name, immutable string
	var tags []string
	cmd := &cobra.Command{
		Use:   "disk PATH...",
		Short: "back up raw disk images or block devices as one backup point",
		Long: command.Manual(`Back up one or more raw disk images (or block devices) as one backup point:
the disks of one machine. Holes of sparse files are never read and all-zero
chunks are never stored. Without change tracking every allocated byte is read
and hashed, but only chunks that differ from the previous point of the same
--name are stored. No snapshot is taken: keep the images still while they
are read (a stopped VM, an LVM snapshot); a disk that changes size or
vanishes fails the backup.`,
			backupOutput,
			`coffer backup disk /var/lib/images/web.raw --name web --tag env=prod
coffer backup disk /dev/vg0/db-root /dev/vg0/db-data --name db`,
			"0; 10 when a disk vanished, shrank or changed during the backup; 9 when the storage is full."),
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := api.BackupDiskInput{Body: api.BackupDiskRequest{Paths: args, Name: name}}
			var err error
			if in.Body.Tags, err = command.ParseTags(tags); err != nil {
				return err
			}
			if in.Body.LockedUntil, err = command.RetainUntil(immutable); err != nil {
				return err
			}
			start := time.Now()
			// Here only: the images are this host's files, which a server
			// cannot read (its backup-disk reads its own image directory).
			p, err := command.RunOp[*api.BackupPoint](cmd.Context(), a.App, "backup-disk", &in)
			if err != nil {
				return err
			}
			return a.reportBackup(p, time.Since(start))
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "name of the backup source (default: the first file's name)")
	cmd.Flags().StringArrayVar(&tags, "tag", nil, "tag KEY=VALUE (repeatable)")
	cmd.Flags().StringVar(&immutable, "immutable-for", "", "make the backup point undeletable for this long (e.g. 30d) on storage with object lock")
	return command.Op(cmd, "backup-disk")
}

func (a *app) cmdBackupVM() *cobra.Command {
	var o struct {
		connection, mode, snapshotMode, quiesce, immutable string
		tags                                               []string
		connections, changeCheck                           int
		noHooks                                            bool
	}
	cmd := &cobra.Command{
		Use:   "vm (--connection NAME VM | QMP-SOCKET)",
		Short: "back up a virtual machine now: a VM of a connection (QEMU, libvirt, vSphere) or a QEMU VM's QMP monitor",
		Long: command.Manual(`Back up every disk of a running VM at one instant, now, without an agent in
the guest and without stopping it.

With --connection, the VM is one of a configured connection (kind qemu,
libvirt or vsphere; `+"`coffer vms`"+` lists them), named by its name or ID. The
backup runs as a job (kind backup-vm, `+"`coffer jobs`"+`) through the same path
as the VMs of `+"`coffer run POLICY`"+`: the configuration's limits (its rate
limits among them), the default timeouts, and retries of transient
hypervisor errors. The hooks of the policies that protect the VM on that
connection run around its snapshot, each once (--no-hooks skips them), so
a point taken now is as application-consistent as the scheduled ones; no
policy's retention thins its points.

With a QMP-SOCKET, the VM is a QEMU VM with a QMP monitor dedicated to
coffer on its command line (it is paused for a few milliseconds while its
disks switch to copy-before-write snapshots):

  -chardev socket,id=coffer,path=/run/coffer/vm1.qmp,server=on,wait=off
  -mon chardev=coffer,mode=control

and, for --snapshot-mode quiesced, qemu-guest-agent in the guest with its
channel at the matching path (vm1.qmp -> vm1.qga, qmp.sock -> qga.sock).

The first backup of a VM is full; later ones read only what the
hypervisor's change tracking recorded (QEMU's persistent dirty bitmaps,
libvirt's checkpoints, vSphere's CBT): since the VM's last point
(incremental, the default) or since its last full (differential). Backups
taken this way are a backup chain of their own (backup-vm@REPOSITORY), so
they never use up a policy's change tracking; tracking a chain no longer
uses is removed after the connection's unused-chain-expiry. Whatever coffer
created on the VM is released at the end; leftovers of a killed coffer are
removed first. Through a server (--server), only --connection is offered:
the server reaches the connection, and a socket is a file on this host.`,
			backupOutput,
			`coffer backup vm --connection vc1 web-1
coffer backup vm --connection kvm2 db-1 --mode full --immutable-for 30d
coffer backup vm /run/coffer/web-1.qmp --snapshot-mode quiesced`,
			"0; 2 when the VM is named ambiguously or the snapshot mode is not possible on its connection; 7 when the "+
				"connection or the VM does not exist, or no VM answers on the socket; 10 when a disk changed under the backup."),
		Args: func(cmd *cobra.Command, args []string) error {
			return backupVMArgs(cmd, args, o.connection)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			in := api.BackupVMInput{Body: api.BackupVMRequest{Mode: o.mode, SnapshotMode: o.snapshotMode, Quiesce: o.quiesce,
				ChangeCheckSpans: o.changeCheck, NoHooks: o.noHooks}}
			if o.connection != "" {
				in.Connection, in.VM = o.connection, args[0]
			} else if a.Remote != nil {
				return command.Usagef("a QMP socket is a file on this host, which the server cannot reach: run this without --server " +
					"(COFFER_SERVER), or back the VM up through a connection of the server: coffer backup vm --connection NAME VM")
			}
			var err error
			if in.Body.Tags, err = command.ParseTags(o.tags); err != nil {
				return err
			}
			if in.Body.LockedUntil, err = command.RetainUntil(o.immutable); err != nil {
				return err
			}
			start := time.Now()
			var p *api.BackupPoint
			if o.connection != "" {
				p, err = command.RunOp[*api.BackupPoint](cmd.Context(), a.App, "backup-vm", &in)
			} else {
				// A QMP socket is this host's: no request names it (BackupQMP).
				p, err = command.Call(a.App, func(s *service.Service) (*api.BackupPoint, error) {
					return backupops.Ops{Service: s}.BackupQMP(cmd.Context(), args[0], o.connections, &in)
				})
			}
			if err != nil {
				return err
			}
			return a.reportBackup(p, time.Since(start))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.connection, "connection", "", "the configured connection whose VM (name or ID) to back up")
	f.StringVar(&o.mode, "mode", "incremental", "full, incremental or differential (the first backup is always full)")
	f.StringVar(&o.snapshotMode, "snapshot-mode", "crash-consistent", "crash-consistent, quiesced, with-memory, suspend or as-is (the point records what was achieved)")
	f.StringVar(&o.quiesce, "quiesce", "fallback", "when the guest agent cannot quiesce: fallback (warn) or required (fail)")
	f.StringArrayVar(&o.tags, "tag", nil, "tag KEY=VALUE (repeatable)")
	f.StringVar(&o.immutable, "immutable-for", "", "make the backup point undeletable for this long on storage with object lock")
	f.IntVar(&o.connections, "nbd-connections", 4, "parallel NBD connections per disk (a QMP socket; a connection has its options.nbd-connections)")
	f.IntVar(&o.changeCheck, "change-check", 0, "spans of each disk an incremental reads to check change tracking (0: 6; -1: off)")
	f.BoolVar(&o.noHooks, "no-hooks", false, "skip the hooks of the policies that protect the VM")
	return command.RemoteToo(command.Op(cmd, "backup-vm"))
}

// backupVMArgs refuses a VM named ambiguously: exactly one argument, a
// VM of --connection or else a QMP socket, and neither a socket given
// with --connection nor a bare VM name without it.
func backupVMArgs(cmd *cobra.Command, args []string, connection string) error {
	switch {
	case len(args) == 0 && connection != "":
		return command.Usagef("name the VM of connection %s to back up: coffer backup vm --connection %s VM (`coffer vms` lists them)", connection, connection)
	case len(args) == 0:
		return command.Usagef("name the VM to back up: coffer backup vm --connection NAME VM (a VM of a configured connection) or coffer backup vm QMP-SOCKET")
	case len(args) > 1:
		return command.Usagef("one VM per backup, not %d (%s): several VMs are backed up by a policy (`coffer run`)", len(args), strings.Join(args, " "))
	}
	if connection != "" && cmd.Flags().Changed("nbd-connections") {
		return command.Usagef("--nbd-connections is for a QMP socket; the NBD connections of connection %s are its options.nbd-connections", connection)
	}
	st, err := os.Stat(args[0])
	isSocket := err == nil && st.Mode()&os.ModeSocket != 0
	switch {
	case connection != "" && isSocket:
		return command.Usagef("%s is a QMP socket, and --connection %s names a VM of that connection instead: drop --connection to back up "+
			"through the socket, or name the VM as the connection lists it (`coffer vms`)", args[0], connection)
	case connection == "" && err != nil && !strings.ContainsRune(args[0], os.PathSeparator):
		return command.Usagef("%s is no QMP socket here: to back up a VM of a configured connection, name the connection: "+
			"coffer backup vm --connection NAME %s (`coffer vms` lists VMs with their connections)", args[0], args[0])
	}
	return nil
}

func (a *app) reportBackup(p *api.BackupPoint, d time.Duration) error {
	return a.Emit(p, nil, func() {
		a.Printf("backup point %s saved: %s %s %s, %d disk(s), %s logical, %s read, %s new, %s stored, %.1fs (%s)\n",
			p.ShortID, p.VM, p.Mode, api.Consistency(p.SnapshotMode, p.SnapshotModeAchieved, p.Hooks), p.DiskCount,
			command.HumanBytes(p.LogicalBytes), command.HumanBytes(p.ReadBytes), command.HumanBytes(p.NewBytes), command.HumanBytes(p.StoredBytes), d.Seconds(), command.Rate(p.LogicalBytes, d))
		for _, w := range p.Warnings {
			a.Printf("warning: %s\n", w)
		}
	})
}
