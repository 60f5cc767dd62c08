package mediacmd

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/mediaops"
)

// The media commands run the media operations of the service: here, on
// the host the library is attached to (--library a library of the
// configuration, a VTL directory or mtx:CHANGER:DEVICE), or through a
// server (--server), whose configuration names the library.

// runMedia runs a media operation on its input: through the server by
// its ID, or else in this process, where the command line may also name
// what only this host has (here: a library's directory or devices, a
// drive, the directories to stage and spool in), which the API's input
// does not carry and the operation's method takes beside it.
func runMedia[I, T any](ctx context.Context, a *app, id string, in *I, here mediaops.MediaHere,
	local func(mediaops.Ops, context.Context, *I, mediaops.MediaHere) (T, error)) (T, error) {
	if a.Remote != nil {
		if err := mediaRemote(here); err != nil {
			var zero T
			return zero, err
		}
		return command.RunOp[T](ctx, a.App, id, in)
	}
	here.Local = true
	return command.Call(a.App, func(s *service.Service) (T, error) { return local(mediaops.Ops{Service: s}, ctx, in, here) })
}

// mediaRemote checks what a media command was given before it goes to a
// server: a library of the server's configuration, its first drive, and
// no directory of this host.
func mediaRemote(here mediaops.MediaHere) error {
	if here.Drive != 0 {
		return command.Usagef("--drive: through a server, the library's first drive is used")
	}
	for flag, v := range map[string]string{"spool-dir": here.SpoolDir, "stage-dir": here.StageDir} {
		if v != "" {
			return command.Usagef("--%s names a directory of this host: through a server, the server chooses it (run the command on the server's host to choose)", flag)
		}
	}
	return nil
}

func (a *app) cmdMedia() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "media",
		Short: "tape libraries: label, copy backup points to tape, restore, verify, catalogue",
		Long: command.Manual(`Sequential media: backup points copied to tape cartridges in a library
(a real one through st and mtx, or coffer's file-backed virtual tape library),
restorable from the tapes alone with the repository's password. See
docs/09-tape.md and docs/design/media-format.md.

--library names the library: a library of the configuration (the
media-libraries section, or coffer config create media-library), a virtual
tape library's directory, or mtx:CHANGER:DEVICE (like mtx:/dev/sg1:/dev/nst0);
--drive the changer's drive number. With --server the commands run on the
server, and --library names a library of its configuration.`, "See the subcommands.",
			`coffer media copy --library /srv/vtl --pool weekly --latest --retention 35d
coffer media restore --library /srv/vtl 3f2a91c0 --to /var/tmp/web.img
coffer media catalog --library /srv/vtl`,
			"That of the subcommand."),
	}
	cmd.AddCommand(a.cmdMediaVTL(), a.cmdMediaLoad(), a.cmdMediaUnload(), a.cmdMediaLabel(), a.cmdMediaCopy(), a.cmdMediaRestore(), a.cmdMediaVerify(),
		a.cmdMediaCatalog(), a.cmdMediaVolumes(), a.cmdMediaContents(), a.cmdMediaFiles())
	return cmd
}

// libraryFlags binds --library and --drive: the drive is the input's
// when the operation names one (load, unload), else the command line's
// (MediaHere.Drive).
func libraryFlags(cmd *cobra.Command, library *string, drive *int) {
	cmd.Flags().StringVar(library, "library", "", "the library: a library of the configuration, a VTL directory, or mtx:CHANGER:DEVICE")
	cmd.Flags().IntVar(drive, "drive", 0, "the changer's number of the drive to use")
}

func (a *app) cmdMediaLabel() *cobra.Command {
	var in api.MediaLabelInput
	var here mediaops.MediaHere
	cmd := &cobra.Command{
		Use:   "label --library LIB --barcode CODE --pool POOL",
		Short: "label a cartridge into a media pool",
		Long: command.Manual(`Write a volume label on a cartridge, erasing it, and record the volume in
the media catalogue. A coffer volume is refused until its retention has
passed, a WORM cartridge holding anything always, and a cartridge holding
other data unless --foreign. Copies label blank cartridges of the library
themselves when a pool needs one.`,
			`"labelled CODE into pool POOL (media set SET)". --json: the volume.`,
			`coffer media label --library /srv/vtl --barcode CFR001L8 --pool weekly`,
			"0; 2 for a protected volume."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := runMedia(cmd.Context(), a, "media-label", &in, here, mediaops.Ops.MediaLabel)
			if res == nil {
				return err
			}
			return a.Emit(res, err, func() {
				a.Printf("labelled %s into pool %s (media set %s)\n", res.Barcode, res.Pool, res.MediaSet)
			})
		},
	}
	libraryFlags(cmd, &in.Library, &here.Drive)
	f := cmd.Flags()
	f.StringVar(&in.Body.Barcode, "barcode", "", "the cartridge's barcode")
	f.StringVar(&in.Body.Pool, "pool", "", "the media pool")
	f.IntVar(&in.Body.BlockSizeBytes, "block-size", 0, "bytes per block (default 256 KiB)")
	f.BoolVar(&in.Body.Foreign, "foreign", false, "overwrite a cartridge holding data that is not a coffer volume")
	return command.RemoteToo(command.Op(cmd, "media-label"))
}

func (a *app) cmdMediaCopy() *cobra.Command {
	var in api.MediaCopyInput
	var here mediaops.MediaHere
	var retention string
	cmd := &cobra.Command{
		Use:   "copy --library LIB --pool POOL [POINT...]",
		Short: "copy backup points to tape",
		Long: command.Manual(`Write backup points of the repository to a media pool: each point as a
self-contained stream (its chunks as stored, its metadata and the key files
wrapped by the repository's passwords), several multiplexed onto the drive
(--multiplex, at most 4:1 unless --max-multiplex says otherwise: restores slow
down beyond it). --drives N writes through N drives of the library at once
(--drive and those after it), a session each, the points dealt out by size;
each drive takes its own cartridges of the pool. A full volume is closed with its index and the copy goes on
on the next volume of the pool (appendable ones first, then blank cartridges,
labelled into the pool). The volumes written are protected from overwriting
for --retention. Each point is spooled (--spool-dir) while it is written.`,
			`"copied N point(s) to M volume(s) ...". --json: {sessions, drives, copied, volumes,
segments, blocks, data_bytes, no_index, multiplex, duration_seconds}.`,
			`coffer media copy --library /srv/vtl --pool weekly --latest --retention 35d
coffer media copy --library mtx:/dev/sg1:/dev/nst0 --pool monthly --name web 3f2a91c0`,
			"0; 2 for a multiplex beyond the cap; 3 for a wrong password."),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.Body.Points = args
			if retention != "" {
				d, err := policy.ParseDuration(retention)
				if err != nil || d < 0 {
					return command.Usagef("--retention %q: want a duration such as 35d or 72h", retention)
				}
				in.Body.RetentionSeconds = d.Seconds()
			}
			res, err := runMedia(cmd.Context(), a, "media-copy", &in, here, mediaops.Ops.MediaCopy)
			if res == nil {
				return err
			}
			return a.Emit(res, err, func() {
				atOnce := ""
				if res.DriveLimit < res.Drives {
					atOnce = fmt.Sprintf(" (%d at once: the library's drive-limit)", res.DriveLimit)
				}
				a.Printf("copied %d point(s) to %d volume(s) through %d drive(s)%s at %d:1: %d block(s), %s in %s\n", len(res.Copied), len(res.Volumes),
					res.Drives, atOnce, res.Multiplex, res.Blocks, command.HumanBytes(res.DataBytes), time.Duration(res.DurationSeconds*float64(time.Second)).Round(time.Millisecond))
				for _, v := range res.Volumes {
					a.Printf("  %s  pool %s  full %v  protected until %s\n", v.Barcode, v.Pool, v.Full, v.ProtectedUntil.Format(time.RFC3339))
				}
				for _, bc := range res.NoIndex {
					a.Printf("warning: volume %s ended before its index: run coffer media catalog --scan to catalogue it from its blocks\n", bc)
				}
			})
		},
	}
	libraryFlags(cmd, &in.Library, &here.Drive)
	f := cmd.Flags()
	f.StringVar(&in.Body.Pool, "pool", "", "the media pool")
	f.StringVar(&in.Body.VM, "name", "", "only points of this source name")
	f.BoolVar(&in.Body.Latest, "latest", false, "only the newest point of each source")
	f.IntVar(&in.Body.Multiplex, "multiplex", 0, "points written at once (default: as many as selected, at most --max-multiplex)")
	f.IntVar(&in.Body.MaxMultiplex, "max-multiplex", 0, "the cap on --multiplex (default 4)")
	f.IntVar(&in.Body.Drives, "drives", 1, "drives of the library written with, a session each (--drive is the first); at most the library's drive-limit at once")
	f.IntVar(&in.Body.RunBlocks, "run-blocks", 0, "blocks of one point kept together on tape (default 1)")
	f.IntVar(&in.Body.BlockSizeBytes, "block-size", 0, "bytes per block of newly labelled volumes (default 256 KiB)")
	f.StringVar(&retention, "retention", "", "protect the volumes written from overwriting for this long (e.g. 35d)")
	f.StringVar(&here.SpoolDir, "spool-dir", "", "where points are spooled while written (default: the temporary directory)")
	return command.RemoteToo(command.Op(cmd, "media-copy"))
}

func (a *app) cmdMediaRestore() *cobra.Command {
	var in api.MediaRestoreInput
	var here mediaops.MediaHere
	cmd := &cobra.Command{
		Use:   "restore --library LIB POINT --to TARGET",
		Short: "restore a backup point's disks from tape, without the repository",
		Long: command.Manual(`Restore the disks of a backup point from tape. The media catalogue
positions the drive on the point's own blocks; the point is read back into a
staging directory (--stage-dir, room for its stored bytes) as the repository
it was copied from, opened with the repository's password, and its disks are
written as for coffer restore. The repository itself is not needed.`,
			`One line per disk, and what the tape read cost: blocks needed, blocks read,
locates. --json: {disks, blocks_needed, blocks_read, read_bytes, locates}.`,
			`coffer media restore --library /srv/vtl 3f2a91c0 --to /var/tmp/web.img
coffer media restore --library /srv/vtl 3f2a91c0 --disk vda --to /dev/vg0/web`,
			"0; 3 for a wrong password; 5 for a block that fails its checksum."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.Point = args[0]
			// Through a server, --to is a path under its restore directory.
			res, err := runMedia(cmd.Context(), a, "media-restore", &in, here, mediaops.Ops.MediaRestore)
			if res == nil {
				return err
			}
			return a.Emit(res, err, func() {
				for _, d := range res.Disks {
					a.Printf("restored %s of %s to %s (%s)\n", d.Disk, d.PointID[:8], d.Target, command.HumanBytes(d.SizeBytes))
				}
				a.Printf("read %d block(s) for %d of the point's, %d locate(s)\n", res.BlocksRead, res.BlocksNeeded, res.Locates)
			})
		},
	}
	libraryFlags(cmd, &in.Library, &here.Drive)
	f := cmd.Flags()
	f.StringVar(&in.Body.Disk, "disk", "", "restore only this disk (index, key or name)")
	f.StringVar(&in.Body.To, "to", "", "target file or device (a directory for several disks)")
	f.BoolVar(&in.Body.Overwrite, "overwrite", false, "replace an existing target file")
	f.StringVar(&here.StageDir, "stage-dir", "", "where the point is staged (default: the temporary directory)")
	f.Int64Var(&in.Body.ReadThroughBlocks, "read-through", 0, "read gaps of up to this many blocks of other points instead of locating")
	return command.RemoteToo(command.Op(cmd, "media-restore"))
}

func (a *app) cmdMediaVerify() *cobra.Command {
	var in api.MediaVerifyInput
	var here mediaops.MediaHere
	cmd := &cobra.Command{
		Use:   "verify --library LIB BARCODE",
		Short: "read a volume back and compare it with its index and the catalogue",
		Long: command.Manual(`Read a volume from its beginning to its end: every block's checksum,
every segment of its index against the blocks found, and the media catalogue
against the index. Blocks of a session cut by a crash are reported as
unindexed: they were never catalogued.`,
			`"volume CODE: OK, N blocks" or what is damaged. --json: {barcode, blocks,
bad_blocks, damaged_blocks, missing_blocks, unindexed_blocks, catalogue_matches, ok}.`,
			`coffer media verify --library /srv/vtl CFR001L8`,
			"0; 5 for damage or a catalogue that does not match."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.Barcode = args[0]
			res, err := runMedia(cmd.Context(), a, "media-verify", &in, here, mediaops.Ops.MediaVerify)
			if res == nil {
				return err
			}
			emitted := a.Emit(res, err, func() {
				a.Printf("volume %s: %d block(s), %d bad (%d inside catalogued data), %d missing, %d unindexed; catalogue matches: %v\n",
					res.Barcode, res.Blocks, len(res.BadBlocks), res.DamagedBlocks, res.MissingBlocks, res.UnindexedBlocks, res.CatalogueMatches)
				for _, b := range res.BadBlocks {
					a.Printf("  bad block at %d: %s\n", b.Position, b.Error)
				}
			})
			if err != nil && !res.OK {
				// Verify says what is wrong with the volume; the advice
				// about repositories does not apply to a tape.
				a.Printf("the points with damaged blocks restore from another copy; `coffer media catalog --library %s` rebuilds a catalogue that does not match\n", in.Library)
				return command.Reported{Err: err, Advised: true}
			}
			return emitted
		},
	}
	libraryFlags(cmd, &in.Library, &here.Drive)
	return command.RemoteToo(command.Op(cmd, "media-verify"))
}

func (a *app) cmdMediaCatalog() *cobra.Command {
	var in api.RebuildMediaCatalogInput
	var here mediaops.MediaHere
	cmd := &cobra.Command{
		Use:   "catalog --library LIB",
		Short: "rebuild the media catalogue from the volumes alone",
		Long: command.Manual(`Mount every cartridge of the library and record what its last index says
(with --scan, what its blocks say: for a volume whose index is missing or
damaged). Blank and foreign cartridges are listed as skipped.`,
			`One line per volume and per skipped cartridge. --json: {volumes, skipped}.`,
			`coffer media catalog --library /srv/vtl
coffer media catalog --library /srv/vtl --scan`,
			"0."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := runMedia(cmd.Context(), a, "rebuild-media-catalog", &in, here, mediaops.Ops.MediaCatalog)
			if res == nil {
				return err
			}
			return a.Emit(res, err, func() {
				for _, v := range res.Volumes {
					a.Printf("%s  pool %s  %d segment(s)\n", v.Barcode, v.Pool, v.Segments)
				}
				for _, s := range res.Skipped {
					a.Printf("%s  skipped: %s\n", s.Barcode, s.Reason)
				}
			})
		},
	}
	libraryFlags(cmd, &in.Library, &here.Drive)
	cmd.Flags().BoolVar(&in.Body.Scan, "scan", false, "read every block instead of the volumes' indexes")
	return command.RemoteToo(command.Op(cmd, "rebuild-media-catalog"))
}

func (a *app) cmdMediaVolumes() *cobra.Command {
	var in api.ListMediaVolumesInput
	cmd := &cobra.Command{
		Use:   "volumes",
		Short: "list the volumes of the media catalogue",
		Long: command.Manual(`List the volumes the media catalogue knows, from the catalog alone.`,
			`A table: barcode, library, pool, media set, full, WORM, protected until, segments. --json: the volumes.`,
			`coffer media volumes --pool weekly`, "0."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			res, err := command.RunOp[[]api.MediaVolume](cmd.Context(), a.App, "list-media-volumes", &in)
			if res == nil {
				return err
			}
			return a.Emit(res, err, func() {
				tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "BARCODE\tLIBRARY\tPOOL\tMEDIA SET\tFULL\tWORM\tPROTECTED UNTIL\tSEGMENTS")
				for _, v := range res {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%v\t%v\t%s\t%d\n", v.Barcode, v.Library, v.Pool, v.MediaSet, v.Full, v.WORM,
						v.ProtectedUntil.Format(time.RFC3339), v.Segments)
				}
				tw.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&in.Pool, "pool", "", "only this pool's volumes")
	return command.RemoteToo(command.Op(cmd, "list-media-volumes"))
}

func (a *app) cmdMediaContents() *cobra.Command {
	var in api.MediaContentsInput
	cmd := &cobra.Command{
		Use:   "contents [POINT]",
		Short: "list which blocks of which volumes hold backup points",
		Long: command.Manual(`List the media catalogue's segments: of one point, of one volume
(--barcode), or all.`,
			`A table: point, VM, volume, blocks, bytes, extents, end. --json: the segments.`,
			`coffer media contents 3f2a91c0
coffer media contents --barcode CFR001L8`, "0; 4 for a point not on media."),
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				in.Point = args[0]
			}
			res, err := command.RunOp[[]api.MediaSegment](cmd.Context(), a.App, "media-contents", &in)
			if res == nil {
				return err
			}
			return a.Emit(res, err, func() {
				tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "POINT\tVM\tVOLUME\tBLOCKS\tBYTES\tEXTENTS\tEND")
				for _, s := range res {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%d-%d\t%s\t%d\t%v\n", s.PointID[:min(8, len(s.PointID))], s.VM, s.Barcode, s.FirstBlock, s.LastBlock,
						command.HumanBytes(s.DataBytes), len(s.Extents), s.End)
				}
				tw.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&in.Barcode, "barcode", "", "only this volume's segments")
	return command.RemoteToo(command.Op(cmd, "media-contents"))
}

func (a *app) cmdMediaFiles() *cobra.Command {
	var in api.MediaFilesExtractInput
	var here mediaops.MediaHere
	cmd := &cobra.Command{
		Use:   "files --library LIB POINT[:DISK] PATH... --to DIR",
		Short: "extract single files from a backed-up disk on tape, without the repository",
		Long: command.Manual(`Extract files or directory trees from inside a disk of a backup point on
tape, as coffer files get does from a repository: the point is staged from
the tapes (--stage-dir) and opened with the repository's password, and the
file readers read its disk (ext2/3/4, XFS, NTFS, FAT). Mode, owner, times and
symlinks are kept; what cannot be extracted is skipped and listed.`,
			`"extracted N file(s), M dir(s) ...". --json: {files, dirs, links,
extracted_bytes, skipped, warnings}.`,
			`coffer media files --library /srv/vtl 3f2a91c0 /etc/fstab /srv/www --to /var/tmp/out`,
			"0; 1 for a path the disk does not have; 6 when some entries were skipped."),
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.Point, in.Disk, _ = strings.Cut(args[0], ":")
			in.Body.Paths = args[1:]
			res, err := runMedia(cmd.Context(), a, "media-files-extract", &in, here, mediaops.Ops.MediaFilesExtract)
			if res == nil {
				return err
			}
			return a.Emit(res, err, func() {
				a.Printf("extracted %d file(s), %d dir(s), %d link(s), %s to %s\n", res.Files, res.Dirs, res.Links, command.HumanBytes(res.ExtractedBytes), in.Body.To)
				for _, s := range res.Skipped {
					a.Printf("skipped %s: %s\n", s.Path, s.Reason)
				}
			})
		},
	}
	libraryFlags(cmd, &in.Library, &here.Drive)
	cmd.Flags().StringVar(&in.Body.To, "to", "", "the directory to extract into")
	cmd.Flags().StringVar(&here.StageDir, "stage-dir", "", "where the point is staged (default: the temporary directory)")
	return command.RemoteToo(command.Op(cmd, "media-files-extract"))
}
