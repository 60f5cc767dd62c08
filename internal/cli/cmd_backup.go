package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
)

func (a *app) cmdBackup() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backup",
		Short: "back up disk images or virtual machines",
	}
	cmd.AddCommand(a.cmdBackupDisk())
	for _, sub := range backupSubcommands {
		cmd.AddCommand(sub(a))
	}
	return cmd
}

// backupSubcommands are added by connector wiring files (backup vm).
var backupSubcommands []func(*app) *cobra.Command

type backupDiskOptions struct {
	name      string
	tags      []string
	immutable string
}

func (a *app) cmdBackupDisk() *cobra.Command {
	var o backupDiskOptions
	cmd := &cobra.Command{
		Use:   "disk PATH...",
		Short: "back up raw disk images or block devices as one backup point",
		Long: `Back up one or more raw disk images (or block devices) as one backup point:
the disks of one machine. Holes of sparse files are never read and all-zero
chunks are never stored. Without change tracking every allocated byte is read
and hashed, but only chunks that differ from the previous point of the same
--name are stored.

EXAMPLES
    coffer backup disk /var/lib/images/web.raw --name web --tag env=prod
    coffer backup disk /dev/vg0/db-root /dev/vg0/db-data --name db`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return a.runBackupDisk(cmd, args, o) },
	}
	cmd.Flags().StringVar(&o.name, "name", "", "name of the backup source (default: the first file's name)")
	cmd.Flags().StringArrayVar(&o.tags, "tag", nil, "tag KEY=VALUE (repeatable)")
	cmd.Flags().StringVar(&o.immutable, "immutable-for", "", "make the backup point undeletable for this long (e.g. 30d) on storage with object lock")
	return cmd
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

func (a *app) runBackupDisk(cmd *cobra.Command, paths []string, o backupDiskOptions) error {
	ctx := cmd.Context()
	tags, err := parseTags(o.tags)
	if err != nil {
		return err
	}
	retain, err := retainUntil(o.immutable)
	if err != nil {
		return err
	}
	if o.name == "" {
		o.name = filepath.Base(paths[0])
	}
	r, err := a.openRepo(ctx)
	if err != nil {
		return err
	}
	src := repo.Source{Kind: "disk", VMName: o.name}
	snaps, err := r.Snapshots(ctx, nil)
	if err != nil {
		return err
	}
	parent := backup.Latest(snaps, src, nil)
	var disks []backup.Disk
	var files []*backup.FileSource
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for i, p := range paths {
		f, err := backup.OpenFile(p)
		if err != nil {
			return fmt.Errorf("%w: %w", backup.ErrSourceChanged, err)
		}
		files = append(files, f)
		alloc, err := f.Allocated()
		if err != nil {
			return err
		}
		key := fmt.Sprint(i)
		prev, err := backup.PreviousIDs(ctx, r, parent, key, f.Size())
		if err != nil {
			return fmt.Errorf("previous backup of %s: %w", p, err)
		}
		mode := "full"
		if prev != nil {
			mode = "compared"
		}
		abs, _ := filepath.Abs(p)
		disks = append(disks, backup.Disk{Key: key, Name: filepath.Base(p), Path: abs, Format: "raw", Reader: f,
			Size: f.Size(), Allocated: alloc, Previous: prev, Mode: mode})
	}
	mode := "full"
	if parent != nil {
		mode = "incremental"
	}
	w, err := r.NewWriter(ctx, "backup disk "+o.name)
	if err != nil {
		return err
	}
	prog := &backup.Progress{}
	bar := a.startProgress("backup "+o.name, prog.BytesTotal.Load, prog.BytesDone.Load, func() string { return stored(prog.BytesNew.Load()) })
	start := time.Now()
	unchanged := func() error {
		for _, f := range files {
			if err := f.CheckUnchanged(); err != nil {
				return err
			}
		}
		return nil
	}
	if !retain.IsZero() && !r.Store().Properties().Retention {
		return usagef("--immutable-for needs storage with retention (S3 Object Lock); %s has none", r.Store().Properties().Location)
	}
	// No snapshot is taken: the image is read as it is, so its consistency
	// is whatever keeps it still (a stopped VM, an LVM snapshot). Nothing
	// was asked for, and as-is is what the point holds.
	snap, err := backup.Run(ctx, w, backup.Request{Source: src, Mode: mode, Parent: parent, Tags: tags, Disks: disks,
		SnapshotModeAchieved: string(hypervisor.AsIs), BeforeCommit: unchanged, RetainUntil: retain}, backup.Options{Progress: prog})
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

func (a *app) reportBackup(s *repo.Snapshot, d time.Duration) error {
	if a.jsonOut {
		return a.printJSON(snapshotJSON(s))
	}
	a.printf("snapshot %s saved: %s %s %s, %d disk(s), %s logical, %s read, %s new, %s stored, %.1fs (%s)\n",
		s.ID.Short(), s.Source.VMName, s.Mode, consistency(s.SnapshotMode, s.SnapshotModeAchieved), len(s.Disks),
		humanBytes(s.Logical()), humanBytes(s.BytesRead), humanBytes(s.BytesNew), humanBytes(s.BytesStored), d.Seconds(), rate(s.Logical(), d))
	for _, w := range s.Warnings {
		a.printf("warning: %s\n", w)
	}
	return nil
}
