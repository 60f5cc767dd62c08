package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/files"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
)

// fileCacheBytes bounds the chunk cache of the random-access disk reader.
const fileCacheBytes = 64 << 20

func (a *app) cmdFiles() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "files",
		Short: "list, find and extract single files from inside backed-up disks",
		Long: `Read files straight from repository chunks through a random-access reader
with a bounded cache: no full restore, no root, no kernel mount, so these
commands also run on the backup server.

BACKUP is a backup point (ID, prefix or "latest"), optionally followed by
:DISK (index, key or name; default: the first disk). Partition tables: GPT
and MBR (primary partitions); filesystems: ext4 (ext2/3), XFS, FAT32 and
NTFS; LVM linear logical volumes. With several readable volumes, the root
holds one directory per volume ("1", "2", "lvm:vg-root"), and paths start
with it ("/2/etc/fstab").

What cannot be read or extracted (special files, damaged parts of a
filesystem) is skipped, never silently: get and find list the skipped
entries at the end, grouped by reason, print each distinct warning once
with its count, and exit with code 6 (partial failure); --json carries
them as "skipped" and "warnings".`,
	}
	cmd.AddCommand(a.cmdFilesLs(), a.cmdFilesGet(), a.cmdFilesFind())
	return cmd
}

func (a *app) cmdFilesLs() *cobra.Command {
	var long, volumes bool
	cmd := &cobra.Command{
		Use:     "ls BACKUP[:DISK] [PATH]",
		Short:   "list a directory inside a backed-up disk",
		Example: "  coffer files ls latest:vda /etc\n  coffer files ls 3fa2c1d0 --volumes",
		Args:    cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withDiskFS(cmd.Context(), args[0], volumes, func(d *files.Disk, fsys files.FS) error {
				if volumes {
					if a.jsonOut {
						return a.printJSON(d.Volumes())
					}
					for _, v := range d.Volumes() {
						a.printf("%-14s %-8s %12d %12d %s\n", v.Name, v.Type, v.Start, v.Size, v.Note)
					}
					return nil
				}
				p := "/"
				if len(args) == 2 {
					p = args[1]
				}
				ents, err := fsys.ReadDir(p)
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.printJSON(ents)
				}
				a.printEntries(ents, long)
				return a.reportProblems(d, nil, "")
			})
		},
	}
	cmd.Flags().BoolVarP(&long, "long", "l", false, "show mode, owner, size and time")
	cmd.Flags().BoolVar(&volumes, "volumes", false, "list the disk's partitions and volumes instead")
	return cmd
}

func (a *app) printEntries(ents []files.Entry, long bool) {
	if !long {
		for _, e := range ents {
			a.printf("%s\n", e.Name)
		}
		return
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 0, 1, ' ', 0)
	for _, e := range ents {
		name := e.Name
		switch {
		case e.Unreadable != "":
			name += " -> ? (" + e.Unreadable + ")"
		case e.Link != "":
			name += " -> " + e.Link
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\n", e.Mode, e.UID, e.GID, e.Size, e.MTime.Format("2006-01-02 15:04"), name)
	}
	tw.Flush()
}

func (a *app) cmdFilesGet() *cobra.Command {
	var to, zipPath string
	cmd := &cobra.Command{
		Use:   "get BACKUP[:DISK] PATH... (--to DIR | --zip FILE)",
		Short: "extract files or directory trees, keeping mode, owner, times and symlinks",
		Example: "  coffer files get latest /etc/nginx --to /tmp/restore\n" +
			"  coffer files get latest:1 /Users/alice/Documents --zip docs.zip",
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if (to == "") == (zipPath == "") {
				return usagef("give exactly one of --to DIR or --zip FILE")
			}
			return a.withDiskFS(cmd.Context(), args[0], false, func(d *files.Disk, fsys files.FS) error {
				var st *files.ExtractStats
				var err error
				if zipPath != "" {
					f, ferr := os.Create(zipPath + ".tmp")
					if ferr != nil {
						return ferr
					}
					st, err = files.Zip(cmd.Context(), fsys, args[1:], f)
					if cerr := f.Close(); err == nil {
						err = cerr
					}
					if err == nil {
						err = os.Rename(zipPath+".tmp", zipPath)
					} else {
						os.Remove(zipPath + ".tmp")
					}
					if errors.Is(err, files.ErrArchiveIncomplete) {
						err = fmt.Errorf("%w; no archive was written (--to DIR extracts everything else and lists what it skips)", err)
					}
				} else {
					st, err = files.Extract(cmd.Context(), fsys, args[1:], to)
				}
				if err != nil {
					return err
				}
				if a.jsonOut {
					if err := a.printJSON(struct {
						*files.ExtractStats
						Warnings []files.Warning `json:"warnings"`
					}{st, d.Warnings()}); err != nil {
						return err
					}
				} else {
					a.printf("extracted %d file(s), %d dir(s), %d link(s), %s\n", st.Files, st.Dirs, st.Links, humanBytes(st.Bytes))
				}
				return a.reportProblems(d, st.Skipped, "extracted")
			})
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "directory to extract into")
	cmd.Flags().StringVar(&zipPath, "zip", "", "write a zip archive instead")
	return cmd
}

func (a *app) cmdFilesFind() *cobra.Command {
	var under string
	cmd := &cobra.Command{
		Use:     "find BACKUP[:DISK] PATTERN",
		Short:   "find files whose name matches a glob pattern",
		Example: "  coffer files find latest '*.conf' --under /etc",
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withDiskFS(cmd.Context(), args[0], false, func(d *files.Disk, fsys files.FS) error {
				found := []files.Entry{}
				skipped, err := files.Find(cmd.Context(), fsys, under, args[1], func(e files.Entry) error {
					if a.jsonOut {
						found = append(found, e)
					} else {
						a.printf("%s\n", e.Path)
					}
					return nil
				})
				if err != nil {
					return err
				}
				if skipped == nil {
					skipped = []files.Skip{}
				}
				if a.jsonOut {
					if err := a.printJSON(map[string]any{"entries": found, "skipped": skipped, "warnings": d.Warnings()}); err != nil {
						return err
					}
				}
				return a.reportProblems(d, skipped, "searched")
			})
		},
	}
	cmd.Flags().StringVar(&under, "under", "/", "directory to search")
	return cmd
}

// reportProblems tells what a files command could not do: the readers'
// warnings, each distinct one once with its count, and the skipped entries
// grouped by reason, each reason once; on stderr, or in the --json
// document the caller printed. Anything skipped makes the command a
// partial failure (exit code 6); done says what happened to the rest.
func (a *app) reportProblems(d *files.Disk, skipped []files.Skip, done string) error {
	if !a.jsonOut {
		for _, w := range d.Warnings() {
			if w.Count > 1 {
				fmt.Fprintf(a.stderr, "warning: %s (%d times)\n", w.Message, w.Count)
			} else {
				fmt.Fprintf(a.stderr, "warning: %s\n", w.Message)
			}
		}
		if len(skipped) > 0 {
			fmt.Fprintf(a.stderr, "skipped %s:\n", entries(len(skipped)))
			var reasons []string
			paths := map[string][]string{}
			for _, s := range skipped {
				if paths[s.Reason] == nil {
					reasons = append(reasons, s.Reason)
				}
				paths[s.Reason] = append(paths[s.Reason], s.Path)
			}
			for _, r := range reasons {
				fmt.Fprintf(a.stderr, "  %s (%s):\n", r, entries(len(paths[r])))
				for _, p := range paths[r] {
					fmt.Fprintf(a.stderr, "    %s\n", p)
				}
			}
		}
	}
	if len(skipped) == 0 {
		return nil
	}
	return partialError{fmt.Sprintf("%s skipped (listed above); everything else was %s", entries(len(skipped)), done)}
}

func entries(n int) string {
	if n == 1 {
		return "1 entry"
	}
	return fmt.Sprintf("%d entries", n)
}

// withDiskFS opens BACKUP[:DISK] for file access.
func (a *app) withDiskFS(ctx context.Context, ref string, allowNoFS bool, fn func(*files.Disk, files.FS) error) error {
	snapRef, diskSel, _ := strings.Cut(ref, ":")
	// Under a restore lease: gc keeps the point's data while files are read.
	r, s, release, err := a.openPoint(ctx, snapRef, "files "+ref)
	if err != nil {
		return err
	}
	defer release()
	var disk repo.Disk
	if diskSel == "" {
		if len(s.Disks) == 0 {
			return fmt.Errorf("snapshot %s has no disks", s.ID.Short())
		}
		disk = s.Disks[0]
	} else {
		ds, err := pickDisks(s, diskSel)
		if err != nil {
			return err
		}
		disk = ds[0]
	}
	dr, err := restore.OpenDisk(ctx, r, disk, restore.CacheChunks(fileCacheBytes, disk.ChunkSize))
	if err != nil {
		return err
	}
	d, err := files.Open(dr, dr.Size())
	if err != nil {
		return err
	}
	fsys, err := d.Root()
	if err != nil {
		if allowNoFS {
			return fn(d, nil)
		}
		return err
	}
	return fn(d, fsys)
}
