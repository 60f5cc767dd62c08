package restoreops

import (
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/apidoc"

	"cmp"
	"context"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/files"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
)

// FilesVolumes lists the partitions and volumes of a backed-up disk: of
// a point (ID, prefix or "latest") and optionally a disk (index, key or
// name; default: the first).
func (s Ops) FilesVolumes(ctx context.Context, in *api.FilesVolumesInput) ([]api.Volume, error) {
	var out []api.Volume
	err := s.withDiskFS(ctx, in.Ref(), true, func(d *files.Disk, _ files.FS) error {
		out = []api.Volume{}
		for _, v := range d.Volumes() {
			out = append(out, api.Volume{Name: v.Name, OffsetBytes: v.Start, SizeBytes: v.Size, Type: v.Type, Note: v.Note})
		}
		return nil
	})
	return out, err
}

// FilesList lists a directory inside a backed-up disk.
func (s Ops) FilesList(ctx context.Context, in *api.FilesListInput) (*api.FilesListing, error) {
	path := in.Path
	if err := s.InsidePath(path); err != nil {
		return nil, err
	}
	if path == "" {
		path = "/"
	}
	var out *api.FilesListing
	err := s.withDiskFS(ctx, in.Ref(), false, func(d *files.Disk, fsys files.FS) error {
		ents, err := fsys.ReadDir(path)
		if err != nil {
			return err
		}
		out = &api.FilesListing{Entries: entryDocs(ents), Warnings: apidoc.WarningDocs(d)}
		return nil
	})
	return out, err
}

// FilesExtract extracts files or directory trees from a backed-up disk
// into a directory, keeping mode, owner, times and symlinks. What cannot
// be extracted is skipped and listed, and the result comes back with a
// partial error.
func (s Ops) FilesExtract(ctx context.Context, in *api.FilesExtractInput) (*api.FilesExtract, error) {
	if err := s.toVMsHost(ctx, &in.WorkerParam, in.Point); err != nil {
		return nil, err
	}
	if out, remote, err := service.OnWorker[*api.FilesExtract](ctx, s.Service, "files-extract", &in.WorkerParam, in,
		s.PointJob(job.KindRestoreFiles, in.Ref())); remote {
		return out, err
	}
	for _, p := range in.Body.Paths {
		if err := s.InsidePath(p); err != nil {
			return nil, err
		}
	}
	to, err := s.HostPath(s.Config.Files.RestoreDir, service.RestoreDir, in.Body.To)
	if err != nil {
		return nil, err
	}
	if to == "" {
		return nil, service.Invalidf("no target directory given")
	}
	return s.extract(ctx, in.Ref(), func(ctx context.Context, fsys files.FS) (*files.ExtractStats, error) {
		return files.Extract(ctx, fsys, in.Body.Paths, to)
	})
}

// FilesArchive streams files or trees from a backed-up disk to w as a zip
// or tar archive. Unreadable entries are skipped and listed (a partial
// error); a file that fails halfway ends the archive with
// files.ErrArchiveIncomplete, and what was written must be discarded.
// The archive is a stream: the command line calls this method for it, the
// server's download endpoint too (Download), never Invoke.
func (s Ops) FilesArchive(ctx context.Context, in *api.FilesArchiveInput, w io.Writer) (*api.FilesExtract, error) {
	for _, p := range in.Paths {
		if err := s.InsidePath(p); err != nil {
			return nil, err
		}
	}
	write := files.Zip
	switch cmp.Or(in.Format, "zip") {
	case "zip":
	case "tar":
		write = files.Tar
	default:
		return nil, service.Invalidf("archive format %q: zip or tar", in.Format)
	}
	return s.extract(ctx, in.Ref(), func(ctx context.Context, fsys files.FS) (*files.ExtractStats, error) {
		return write(ctx, fsys, in.Paths, w)
	})
}

func (s Ops) extract(ctx context.Context, ref string, do func(context.Context, files.FS) (*files.ExtractStats, error)) (*api.FilesExtract, error) {
	return service.Run(ctx, s.Service, s.PointJob(job.KindRestoreFiles, ref), func(ctx context.Context, _ service.Job) (*api.FilesExtract, error) {
		var out *api.FilesExtract
		err := s.withDiskFS(ctx, ref, false, func(d *files.Disk, fsys files.FS) error {
			st, err := do(ctx, fsys)
			if err != nil {
				return err
			}
			out = &api.FilesExtract{Files: st.Files, Dirs: st.Dirs, Links: st.Links, ExtractedBytes: st.Bytes,
				Skipped: apidoc.SkipDocs(st.Skipped), Warnings: apidoc.WarningDocs(d)}
			return apidoc.SkippedError(out.Skipped, "extracted")
		})
		return out, err
	})
}

// FilesFind finds files whose name matches a glob pattern under a
// directory; the result lists them. Directories that cannot be searched
// are skipped and listed, with a partial error.
func (s Ops) FilesFind(ctx context.Context, in *api.FilesFindInput) (*api.FilesFind, error) {
	return s.FilesFindEach(ctx, in, nil)
}

// FilesFindEach is FilesFind handing every match to each as it is found
// (the result's entries then stay empty): the command line prints the
// paths of a long search as they come. A callback is not a request's to
// give, so it is a method of its own rather than part of the input.
func (s Ops) FilesFindEach(ctx context.Context, in *api.FilesFindInput, each func(api.FileEntry) error) (*api.FilesFind, error) {
	if err := s.InsidePath(in.Under); err != nil {
		return nil, err
	}
	under := in.Under
	if under == "" {
		under = "/"
	}
	var out *api.FilesFind
	err := s.withDiskFS(ctx, in.Ref(), false, func(d *files.Disk, fsys files.FS) error {
		out = &api.FilesFind{Entries: []api.FileEntry{}}
		skipped, err := files.Find(ctx, fsys, under, in.Pattern, func(e files.Entry) error {
			if each != nil {
				return each(entryDoc(e))
			}
			out.Entries = append(out.Entries, entryDoc(e))
			return nil
		})
		if err != nil {
			return err
		}
		out.Skipped, out.Warnings = apidoc.SkipDocs(skipped), apidoc.WarningDocs(d)
		return apidoc.SkippedError(out.Skipped, "searched")
	})
	return out, err
}

// withDiskFS opens BACKUP[:DISK] for file access, under a restore lease:
// gc keeps the point's data while files are read.
func (s Ops) withDiskFS(ctx context.Context, ref string, allowNoFS bool, fn func(*files.Disk, files.FS) error) error {
	pointRef, diskSel, _ := strings.Cut(ref, ":")
	pt, err := s.OpenPoint(ctx, pointRef, "files "+ref)
	if err != nil {
		return err
	}
	defer pt.Release()
	var disk repo.Disk
	if diskSel == "" {
		if len(pt.Point.Disks) == 0 {
			return fmt.Errorf("backup point %s has no disks", pt.Point.ID.Short())
		}
		disk = pt.Point.Disks[0]
	} else {
		ds, err := service.PickDisks(pt.Point, diskSel)
		if err != nil {
			return err
		}
		disk = ds[0]
	}
	dr, err := restore.OpenDisk(ctx, pt.Repo, disk, restore.CacheChunks(service.FileCacheBytes, disk.ChunkSize))
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

func entryDocs(es []files.Entry) []api.FileEntry {
	out := make([]api.FileEntry, 0, len(es))
	for _, e := range es {
		out = append(out, entryDoc(e))
	}
	return out
}

func entryDoc(e files.Entry) api.FileEntry {
	return api.FileEntry{Path: e.Path, Name: e.Name, Type: fileType(e.Mode), Mode: e.Mode.String(), SizeBytes: e.Size,
		UID: e.UID, GID: e.GID, MTime: e.MTime, ATime: e.ATime, CTime: e.CTime, Link: e.Link, Inode: e.Ino, Unreadable: e.Unreadable}
}

func fileType(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeCharDevice != 0:
		return "char-device"
	case m&fs.ModeDevice != 0:
		return "block-device"
	case m&fs.ModeNamedPipe != 0:
		return "pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	case m.IsRegular():
		return "file"
	}
	return "other"
}
