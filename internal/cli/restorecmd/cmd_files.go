package restorecmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/apiclient"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/files"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/apidoc"
	"github.com/coffer-backup/coffer/internal/service/restoreops"
)

func (a *app) cmdFiles() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "files",
		Short: "list, find and extract single files from inside backed-up disks",
		Long: command.Manual(`Read files straight from repository chunks through a random-access reader
with a bounded cache: no full restore, no root, no kernel mount, so these
commands also run on the backup server. They hold a lease on the
repository while they read, so garbage collection keeps the point's data.

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
			"See the subcommands.",
			`coffer files ls latest:vda /etc -l
coffer files get latest /etc/nginx --to /tmp/nginx
coffer files find latest '*.conf' --under /etc`,
			"That of the subcommand."),
	}
	cmd.AddCommand(a.cmdFilesLs(), a.cmdFilesGet(), a.cmdFilesFind())
	return cmd
}

func (a *app) cmdFilesLs() *cobra.Command {
	var long, volumes bool
	cmd := &cobra.Command{
		Use:   "ls BACKUP[:DISK] [PATH]",
		Short: "list a directory inside a backed-up disk",
		Long: command.Manual(`List a directory (default: the root) inside a backed-up disk, or with
--volumes the disk's partitions and volumes (also when none holds a
readable filesystem).`,
			`One name per line; -l adds mode, owner, size and time, and link targets.
--volumes: NAME, TYPE, offset, size, note. --json: {entries: [{path, name,
type, mode, size_bytes, uid, gid, mtime, atime, ctime, link, inode,
unreadable}], warnings: [{message, count}]}, or with --volumes a list of
{name, offset_bytes, size_bytes, type, note}.`,
			`coffer files ls latest:vda /etc
coffer files ls latest /etc -l
coffer files ls 3fa2c1d0 --volumes`,
			"0; 7 for an unknown point or a path that does not exist; 2 for a disk without a readable file system."),
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if volumes {
				vols, err := command.RunOp[[]api.Volume](cmd.Context(), a.App, "files-volumes", &api.FilesVolumesInput{DiskParam: api.DiskParamOf(args[0])})
				if err != nil {
					return err
				}
				return a.Emit(vols, nil, func() {
					for _, v := range vols {
						a.Printf("%-14s %-8s %12d %12d %s\n", v.Name, v.Type, v.OffsetBytes, v.SizeBytes, v.Note)
					}
				})
			}
			p := "/"
			if len(args) == 2 {
				p = args[1]
			}
			ls, err := command.RunOp[*api.FilesListing](cmd.Context(), a.App, "files-list", &api.FilesListInput{DiskParam: api.DiskParamOf(args[0]), Path: p})
			if err != nil {
				return err
			}
			return a.Emit(ls, nil, func() {
				a.printEntries(ls.Entries, long)
				a.printProblems(ls.Warnings, nil)
			})
		},
	}
	cmd.Flags().BoolVarP(&long, "long", "l", false, "show mode, owner, size and time")
	cmd.Flags().BoolVar(&volumes, "volumes", false, "list the disk's partitions and volumes instead")
	return command.RemoteToo(command.Op(cmd, "files-list", "files-volumes"))
}

func (a *app) printEntries(ents []api.FileEntry, long bool) {
	if !long {
		for _, e := range ents {
			a.Printf("%s\n", e.Name)
		}
		return
	}
	tw := tabwriter.NewWriter(a.Stdout, 0, 0, 1, ' ', 0)
	for _, e := range ents {
		name := e.Name
		switch {
		case e.Unreadable != "":
			name += " -> ? (" + e.Unreadable + ")"
		case e.Link != "":
			name += " -> " + e.Link
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\n", e.Mode, e.UID, e.GID, e.SizeBytes, e.MTime.Format("2006-01-02 15:04"), name)
	}
	_ = tw.Flush()
}

func (a *app) cmdFilesGet() *cobra.Command {
	var to, zipPath, tarPath string
	var worker api.WorkerParam
	cmd := &cobra.Command{
		Use:   "get BACKUP[:DISK] PATH... (--to DIR | --zip FILE | --tar FILE)",
		Short: "extract files or directory trees, keeping mode, owner, times and symlinks",
		Long: command.Manual(`Extract files or whole directory trees from a backed-up disk: into a
directory (--to; owners are kept when running as root), or as a zip or
tar archive (--zip, --tar; "-" writes the archive to stdout). Each path
lands under its base name. A path that does not exist fails the command
before anything is written.

What cannot be extracted (special files, a symlink whose target blocks
are damaged, a file whose data cannot be read) is skipped and listed at
the end, and the rest is extracted. In an archive, a file that turns
unreadable halfway stops the archive (an entry cannot be taken back) and
no archive is written; --to skips it and goes on.`,
			`"extracted N file(s), N dir(s), N link(s), SIZE", then the warnings and
the skipped entries grouped by reason, on stderr. --json: {files, dirs,
links, extracted_bytes, skipped: [{path, reason}], warnings: [{message,
count}]}.`,
			`coffer files get latest /etc/nginx --to /tmp/restore
coffer files get latest:1 /Users/alice/Documents --zip docs.zip
coffer files get latest /var/www --tar - | tar -tv`,
			"0; 6 when entries were skipped (listed); 1 when a path does not exist or an archive file turned unreadable halfway."),
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			given := 0
			for _, s := range []string{to, zipPath, tarPath} {
				if s != "" {
					given++
				}
			}
			if given != 1 {
				return command.Usagef("give exactly one of --to DIR, --zip FILE or --tar FILE")
			}
			if worker.Worker != "" && to == "" {
				return command.Usagef("--worker extracts into a directory on the worker's host (--to), not into an archive here")
			}
			var st *api.FilesExtract
			var err error
			switch {
			case to != "":
				// Through a server, --to is a directory under its restore directory.
				st, err = command.RunOp[*api.FilesExtract](cmd.Context(), a.App, "files-extract",
					&api.FilesExtractInput{DiskParam: api.DiskParamOf(args[0]), WorkerParam: worker, Body: api.FilesExtractRequest{Paths: args[1:], To: to}})
			case zipPath != "":
				st, err = a.archive(cmd, args, "zip", zipPath)
			default:
				st, err = a.archive(cmd, args, "tar", tarPath)
			}
			if st == nil {
				return err
			}
			return a.Emit(st, err, func() {
				a.Printf("extracted %d file(s), %d dir(s), %d link(s), %s\n", st.Files, st.Dirs, st.Links, command.HumanBytes(st.ExtractedBytes))
				a.printProblems(st.Warnings, st.Skipped)
			})
		},
	}
	cmd.Flags().StringVar(&to, "to", "", "directory to extract into")
	cmd.Flags().StringVar(&zipPath, "zip", "", `write a zip archive instead ("-": to stdout)`)
	cmd.Flags().StringVar(&tarPath, "tar", "", `write a tar archive instead ("-": to stdout)`)
	command.WorkerFlag(cmd.Flags(), &worker)
	return command.RemoteToo(command.Op(cmd, "files-extract", "files-archive"))
}

// archive writes an archive to path ("-": stdout). A file appears only
// complete: it is written under a temporary name and renamed.
func (a *app) archive(cmd *cobra.Command, args []string, format, path string) (*api.FilesExtract, error) {
	in := &api.FilesArchiveInput{DiskParam: api.DiskParamOf(args[0]), Paths: args[1:], Format: format}
	// The archive is a stream, not a document: the service's method writes
	// it here, the server's download writes it to the client.
	run := func(w io.Writer) (*api.FilesExtract, error) {
		if a.Remote != nil {
			// The server's answer is the archive; what it skipped comes
			// as a partial error after it (no document).
			r, err := apiclient.RequestOf("files-archive", in)
			if err != nil {
				return nil, err
			}
			return nil, a.Remote.Download(cmd.Context(), a.RemoteRequest(r), w)
		}
		return command.Call(a.App, func(s *service.Service) (*api.FilesExtract, error) {
			return restoreops.Ops{Service: s}.FilesArchive(cmd.Context(), in, w)
		})
	}
	if path == "-" {
		if a.JSON {
			return nil, command.Usagef("--%s - writes the archive to stdout, where --json would write its document: drop one", format)
		}
		st, err := run(a.Stdout)
		if st != nil {
			a.printProblems(st.Warnings, st.Skipped)
		}
		return nil, err // stdout holds the archive: no summary after it
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return nil, err
	}
	st, err := run(f)
	cerr := f.Close()
	written := err == nil || service.Classify(err) == api.Partial // skipped entries are listed, the archive holds the rest
	if written && cerr == nil {
		if rerr := os.Rename(tmp, path); rerr != nil {
			_ = os.Remove(tmp) // best effort after the error returned
			return nil, rerr
		}
		return st, err
	}
	_ = os.Remove(tmp) // the archive failed: best effort
	if written {
		return nil, cerr
	}
	if errors.Is(err, files.ErrArchiveIncomplete) {
		err = fmt.Errorf("%w; no archive was written (--to DIR extracts everything else and lists what it skips)", err)
	}
	return nil, err
}

func (a *app) cmdFilesFind() *cobra.Command {
	var under string
	cmd := &cobra.Command{
		Use:   "find BACKUP[:DISK] PATTERN",
		Short: "find files whose name matches a glob pattern",
		Long: command.Manual(`Find the files, directories and links under a directory (--under, default
the root) whose name matches a glob pattern ("*.conf", "id_*"). Paths are
printed as they are found; directories that cannot be searched are skipped
and listed at the end.`,
			`One path per line, then the warnings and skipped directories on stderr.
--json: {entries: [file entries, as in ls], skipped: [{path, reason}],
warnings: [{message, count}]}.`,
			`coffer files find latest '*.conf' --under /etc
coffer files find latest:vdb 'core.*' --json | jq -r '.entries[].path'`,
			"0; 6 when directories were skipped (listed)."),
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			in := &api.FilesFindInput{DiskParam: api.DiskParamOf(args[0]), Under: under, Pattern: args[1]}
			var res *api.FilesFind
			var err error
			switch {
			case a.JSON:
				res, err = command.RunOp[*api.FilesFind](cmd.Context(), a.App, "files-find", in)
			case a.Remote != nil:
				res, err = command.RunOp[*api.FilesFind](cmd.Context(), a.App, "files-find", in)
				for _, e := range entriesOf(res) { // found by the server, printed now
					a.Printf("%s\n", e.Path)
				}
			default:
				// Here, each path is printed as it is found (a callback no
				// request carries: FilesFindEach).
				res, err = command.Call(a.App, func(s *service.Service) (*api.FilesFind, error) {
					return restoreops.Ops{Service: s}.FilesFindEach(cmd.Context(), in, func(e api.FileEntry) error { a.Printf("%s\n", e.Path); return nil })
				})
			}
			if res == nil {
				return err
			}
			return a.Emit(res, err, func() { a.printProblems(res.Warnings, res.Skipped) })
		},
	}
	cmd.Flags().StringVar(&under, "under", "/", "directory to search")
	return command.RemoteToo(command.Op(cmd, "files-find"))
}

// printProblems tells what a files command could not do, on stderr: the
// readers' warnings, each distinct one once with its count, and the
// skipped entries grouped by reason, each reason once.
func (a *app) printProblems(warnings []api.Warning, skipped []api.Skip) {
	if a.JSON {
		return
	}
	for _, w := range warnings {
		if w.Count > 1 {
			fmt.Fprintf(a.Stderr, "warning: %s (%d times)\n", w.Message, w.Count)
		} else {
			fmt.Fprintf(a.Stderr, "warning: %s\n", w.Message)
		}
	}
	if len(skipped) == 0 {
		return
	}
	fmt.Fprintf(a.Stderr, "skipped %s:\n", apidoc.Entries(len(skipped)))
	var reasons []string
	paths := map[string][]string{}
	for _, s := range skipped {
		if paths[s.Reason] == nil {
			reasons = append(reasons, s.Reason)
		}
		paths[s.Reason] = append(paths[s.Reason], s.Path)
	}
	for _, r := range reasons {
		fmt.Fprintf(a.Stderr, "  %s (%s):\n", r, apidoc.Entries(len(paths[r])))
		for _, p := range paths[r] {
			fmt.Fprintf(a.Stderr, "    %s\n", p)
		}
	}
}

// entriesOf is what a search found (none when it failed).
func entriesOf(res *api.FilesFind) []api.FileEntry {
	if res == nil {
		return nil
	}
	return res.Entries
}
