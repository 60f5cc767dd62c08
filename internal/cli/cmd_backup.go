package cli

import (
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/service"
)

func (a *app) cmdBackup() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "back up disk images or virtual machines",
		Long: manual(`Back up now, into the repository: disk images or block devices (backup
disk), or a running QEMU VM (backup vm). Fleets are backed up by policies
instead (`+"`coffer run`"+`, `+"`coffer server`"+`). Every backup point is recorded in
the catalog too.`,
			"See the subcommands.",
			`coffer backup disk /var/lib/images/web.raw --name web
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
		Long: manual(`Back up one or more raw disk images (or block devices) as one backup point:
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
			in := service.BackupDiskInput{Paths: args, Name: name}
			var err error
			if in.Tags, err = parseTags(tags); err != nil {
				return err
			}
			if in.LockedUntil, err = retainUntil(immutable); err != nil {
				return err
			}
			start := time.Now()
			p, err := call(a, func(s *service.Service) (*api.BackupPoint, error) { return s.BackupDisk(cmd.Context(), in) })
			if err != nil {
				return err
			}
			return a.reportBackup(p, time.Since(start))
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "name of the backup source (default: the first file's name)")
	cmd.Flags().StringArrayVar(&tags, "tag", nil, "tag KEY=VALUE (repeatable)")
	cmd.Flags().StringVar(&immutable, "immutable-for", "", "make the backup point undeletable for this long (e.g. 30d) on storage with object lock")
	return op(cmd, "backup-disk")
}

func (a *app) cmdBackupVM() *cobra.Command {
	var o struct {
		mode, snapshotMode, quiesce, immutable string
		tags                                   []string
		connections, changeCheck               int
	}
	cmd := &cobra.Command{
		Use:   "vm QMP-SOCKET",
		Short: "back up a running QEMU/KVM virtual machine through its QMP monitor",
		Long: manual(`Back up every disk of a running QEMU VM at one instant, without an agent in
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
			backupOutput,
			`coffer backup vm /run/coffer/web-1.qmp --snapshot-mode quiesced
coffer backup vm /run/coffer/db-1.qmp --mode full --immutable-for 30d`,
			"0; 7 when no VM answers on the socket; 10 when a disk changed under the backup."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := service.BackupQEMUInput{Socket: args[0], Mode: o.mode, SnapshotMode: hypervisor.SnapshotMode(o.snapshotMode),
				Quiesce: hypervisor.QuiescePolicy(o.quiesce), NBDConnections: o.connections,
				ChangeCheckSpans: o.changeCheck}
			var err error
			if in.Tags, err = parseTags(o.tags); err != nil {
				return err
			}
			if in.LockedUntil, err = retainUntil(o.immutable); err != nil {
				return err
			}
			start := time.Now()
			p, err := call(a, func(s *service.Service) (*api.BackupPoint, error) { return s.BackupQEMU(cmd.Context(), in) })
			if err != nil {
				return err
			}
			return a.reportBackup(p, time.Since(start))
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.mode, "mode", "incremental", "full, incremental or differential (the first backup is always full)")
	f.StringVar(&o.snapshotMode, "snapshot-mode", "crash-consistent", "crash-consistent, quiesced, with-memory, suspend or as-is (the point records what was achieved)")
	f.StringVar(&o.quiesce, "quiesce", "fallback", "when the guest agent cannot quiesce: fallback (warn) or required (fail)")
	f.StringArrayVar(&o.tags, "tag", nil, "tag KEY=VALUE (repeatable)")
	f.StringVar(&o.immutable, "immutable-for", "", "make the backup point undeletable for this long on storage with object lock")
	f.IntVar(&o.connections, "nbd-connections", 4, "parallel NBD connections per disk")
	f.IntVar(&o.changeCheck, "change-check", 0, "spans of each disk an incremental reads to check change tracking (0: 8; -1: off)")
	return op(cmd, "backup-vm")
}

func parseTags(tags []string) (map[string]string, error) {
	out := map[string]string{}
	for _, t := range tags {
		k, v, ok := strings.Cut(t, "=")
		if !ok || k == "" {
			return nil, usagef("tag %q: want KEY=VALUE", t)
		}
		out[k] = v
	}
	if len(out) == 0 {
		return nil, nil
	}
	return out, nil
}

func (a *app) reportBackup(p *api.BackupPoint, d time.Duration) error {
	return a.emit(p, nil, func() {
		a.printf("backup point %s saved: %s %s %s, %d disk(s), %s logical, %s read, %s new, %s stored, %.1fs (%s)\n",
			p.ShortID, p.VM, p.Mode, service.Consistency(p.SnapshotMode, p.SnapshotModeAchieved, p.Hooks), p.DiskCount,
			humanBytes(p.LogicalBytes), humanBytes(p.ReadBytes), humanBytes(p.NewBytes), humanBytes(p.StoredBytes), d.Seconds(), rate(p.LogicalBytes, d))
		for _, w := range p.Warnings {
			a.printf("warning: %s\n", w)
		}
	})
}
