package service

import (
	"context"
	"fmt"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/files"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/task"
)

// MediaFilesInput extracts files from a disk of a point on media.
type MediaFilesInput struct {
	MediaLibraryInput
	// Ref is POINT[:DISK], the point an ID or unique prefix in the media
	// catalogue.
	Ref      string
	Paths    []string
	To       string
	StageDir string
}

// MediaFilesExtract extracts files or trees from inside a backed-up disk
// of a point on tape, without its repository: the point is staged from
// the media as for MediaRestore, and the file readers of `coffer files
// get` read the disk from the staged repository.
func (s *Service) MediaFilesExtract(ctx context.Context, in MediaFilesInput) (*api.FilesExtract, error) {
	if in.To == "" {
		return nil, invalidf("no target directory given")
	}
	if len(in.Paths) == 0 {
		return nil, invalidf("no path given")
	}
	pointRef, diskSel, _ := strings.Cut(in.Ref, ":")
	ml, err := s.findLibrary(ctx, in.MediaLibraryInput)
	if err != nil {
		return nil, err
	}
	spec := TaskSpec{Kind: task.KindMediaRestore, Object: ml.object(), Detail: in.Ref + " from library " + ml.Ref()}
	return run(ctx, s, spec, func(ctx context.Context, _ Task) (*api.FilesExtract, error) {
		staged, done, err := s.stageFromMedia(ctx, ml, pointRef, in.StageDir, 0)
		if err != nil {
			return nil, err
		}
		defer done()
		disk, err := oneDisk(staged.Point, diskSel)
		if err != nil {
			return nil, err
		}
		dr, err := restore.OpenDisk(ctx, staged.Repo, disk, restore.CacheChunks(fileCacheBytes, disk.ChunkSize))
		if err != nil {
			return nil, err
		}
		d, err := files.Open(dr, dr.Size())
		if err != nil {
			return nil, err
		}
		fsys, err := d.Root()
		if err != nil {
			return nil, err
		}
		st, err := files.Extract(ctx, fsys, in.Paths, in.To)
		if err != nil {
			return nil, err
		}
		out := &api.FilesExtract{Files: st.Files, Dirs: st.Dirs, Links: st.Links, ExtractedBytes: st.Bytes,
			Skipped: skipDocs(st.Skipped), Warnings: warningDocs(d)}
		return out, skippedError(out.Skipped, "extracted")
	})
}

// oneDisk is the disk a selector names, the first when it names none.
func oneDisk(snap *repo.Point, sel string) (repo.Disk, error) {
	if sel == "" {
		if len(snap.Disks) == 0 {
			return repo.Disk{}, fmt.Errorf("backup point %s has no disks", snap.ID.Short())
		}
		return snap.Disks[0], nil
	}
	ds, err := pickDisks(snap, sel)
	if err != nil {
		return repo.Disk{}, err
	}
	return ds[0], nil
}
