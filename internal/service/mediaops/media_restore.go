package mediaops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"context"
	"fmt"
	"slices"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/media/volume"
	"github.com/coffer-backup/coffer/internal/mediacopy"
	"github.com/coffer-backup/coffer/internal/restore"
)

// MediaRestore restores a point's disks from tape without its repository:
// the catalogue positions the drive on the point's own blocks, the point
// is staged (in here.StageDir: room for its stored bytes) as the
// repository it was written as, opened with the repository's password,
// and the restore writers rebuild the disks. Disk, To and Overwrite are as
// for RestoreDisks (raw images).
func (s Ops) MediaRestore(ctx context.Context, in *api.MediaRestoreInput, here MediaHere) (*api.MediaRestoreResult, error) {
	return s.mediaRestore(ctx, in, here, nil)
}

func (s Ops) mediaRestore(ctx context.Context, in *api.MediaRestoreInput, here MediaHere, handed mediaBook) (*api.MediaRestoreResult, error) {
	at, err := s.locate(ctx, here.library(in.Library, here.Drive), handed)
	if err != nil {
		return nil, err
	}
	to := in.Body.To
	if at.worker == "" { // the worker confines the target to its own restore directory
		if to, err = here.target(s, to); err != nil {
			return nil, err
		}
	}
	if to == "" {
		return nil, service.Invalidf("no restore target given (--to)")
	}
	if in.Point == "" {
		return nil, service.Invalidf("no backup point given")
	}
	spec := service.JobSpec{Kind: job.KindMediaRestore, Object: at.ml.object(), Detail: in.Point + " from library " + at.ml.Ref()}
	return service.Run(ctx, s.Service, spec, func(ctx context.Context, t service.Job) (*api.MediaRestoreResult, error) {
		if at.worker != "" {
			return handOffJob[*api.MediaRestoreResult](ctx, s, t, at, "media-restore", in, "", in.Point)
		}
		staged, closeStaged, err := s.stageFromMedia(ctx, at, in.Point, here.StageDir, in.Body.ReadThroughBlocks)
		if err != nil {
			return nil, err
		}
		defer closeStaged()
		disks, err := service.PickDisks(staged.Point, in.Body.Disk)
		if err != nil {
			return nil, err
		}
		targets, err := service.DiskTargets(to, disks)
		if err != nil {
			return nil, err
		}
		out := &api.MediaRestoreResult{Disks: []api.RestoredDisk{}, BlocksNeeded: staged.Read.BlocksNeeded,
			BlocksRead: staged.Read.BlocksRead, ReadBytes: staged.Read.BytesRead, Locates: staged.Read.Locates}
		for i, d := range disks {
			prog := &restore.Progress{}
			t.Progress(service.Meter{Label: "restore " + d.Name, Done: prog.BytesDone.Load, Total: prog.BytesTotal.Load})
			start := time.Now()
			st, err := restore.ToFile(ctx, staged.Repo, staged.Point, d, targets[i], restore.FileOptions{Progress: prog, Overwrite: in.Body.Overwrite})
			if err != nil {
				return out, fmt.Errorf("disk %s: %w", d.Name, err)
			}
			s.ReportZeroing(t, d.Name, st)
			out.Disks = append(out.Disks, api.RestoredDisk{PointID: staged.Point.ID.String(), Disk: d.Name, Target: targets[i], Format: "raw",
				SizeBytes: d.Size, WrittenBytes: st.BytesWritten, ZeroBytes: st.BytesZero, ZeroOffloadedBytes: st.ZeroOffloaded,
				ZeroWrittenBytes: st.ZeroWritten, ReadRequests: st.Requests,
				DurationSeconds: time.Since(start).Seconds(), LostRanges: []api.Range{}, Copies: []api.DiskCopy{}})
		}
		return out, nil
	})
}

// stageFromMedia reads a point from the media into a staged repository,
// positioned by the media catalogue, and opens it with the default
// repository's password. done closes the staged repository and the
// library.
func (s Ops) stageFromMedia(ctx context.Context, at libraryAt, point, stageDir string, readThrough int64) (*mediacopy.Staged, func(), error) {
	rows, err := at.book.segments(ctx, "", point)
	if err != nil {
		return nil, nil, err
	}
	var placed []volume.Placed
	for _, r := range rows {
		p, err := placedFromRow(r)
		if err != nil {
			return nil, nil, err
		}
		placed = append(placed, p)
	}
	segs, err := mediacopy.Choose(placed)
	if err != nil {
		return nil, nil, err
	}
	pw, err := service.Password(s.Config.Repository.Password)
	if err != nil {
		return nil, nil, err
	}
	lib, closeLib, err := at.ml.Open()
	if err != nil {
		return nil, nil, err
	}
	staged, err := mediacopy.Stage(ctx, lib, segs, stageDir, pw, volume.ReadOptions{ReadThrough: readThrough})
	if err != nil {
		s.closeLibrary(closeLib)
		return nil, nil, err
	}
	return staged, func() { s.warnClose("the staged point", staged.Close); s.closeLibrary(closeLib) }, nil
}

// MediaVerify reads a volume back: every block's checksum, the volume's
// index against its blocks, and the catalogue against the index.
func (s Ops) MediaVerify(ctx context.Context, in *api.MediaVerifyInput, here MediaHere) (*api.MediaVerifyReport, error) {
	return s.mediaVerify(ctx, in, here, nil)
}

func (s Ops) mediaVerify(ctx context.Context, in *api.MediaVerifyInput, here MediaHere, handed mediaBook) (*api.MediaVerifyReport, error) {
	barcode := in.Barcode
	if barcode == "" {
		return nil, service.Invalidf("no volume given")
	}
	at, err := s.locate(ctx, here.library(in.Library, here.Drive), handed)
	if err != nil {
		return nil, err
	}
	spec := service.JobSpec{Kind: job.KindMediaVerify, Object: at.ml.object(), Detail: barcode + " in library " + at.ml.Ref()}
	return service.Run(ctx, s.Service, spec, func(ctx context.Context, t service.Job) (*api.MediaVerifyReport, error) {
		if at.worker != "" {
			return handOffJob[*api.MediaVerifyReport](ctx, s, t, at, "media-verify", in, barcode, "")
		}
		lib, closeLib, err := at.ml.Open()
		if err != nil {
			return nil, err
		}
		defer s.closeLibrary(closeLib)
		v, err := lib.Mount(ctx, barcode)
		if err != nil {
			return nil, err
		}
		rep, err := v.Scan()
		if err != nil {
			return nil, err
		}
		rows, err := at.book.segments(ctx, barcode, "")
		if err != nil {
			return nil, err
		}
		out := &api.MediaVerifyReport{Barcode: barcode, Blocks: rep.Blocks, BadBlocks: []api.MediaBadBlock{}, DamagedBlocks: rep.BadIndexed,
			MissingBlocks: rep.Missing, UnindexedBlocks: rep.Unindexed, CatalogueMatches: sameRows(rows, segmentRows(v.Index))}
		for _, b := range rep.Bad {
			out.BadBlocks = append(out.BadBlocks, api.MediaBadBlock{Position: b.Pos, Error: b.Err})
		}
		out.OK = rep.IndexMatches && out.CatalogueMatches
		if !out.OK {
			return out, api.Errorf(api.Integrity, "volume %s: %d damaged and %d missing block(s); the catalogue %s the volume's index",
				barcode, out.DamagedBlocks, out.MissingBlocks, map[bool]string{true: "matches", false: "does not match"}[out.CatalogueMatches])
		}
		return out, nil
	})
}

// sameRows compares catalogue rows with a volume index's, in any order.
func sameRows(a, b []catalog.MediaSegment) bool {
	if len(a) != len(b) {
		return false
	}
	key := func(s catalog.MediaSegment) string {
		return fmt.Sprintf("%s/%s/%d/%d/%d/%d/%d/%v/%v", s.Barcode, s.Session, s.Stream, s.FirstSeq, s.LastSeq, s.Bytes, s.PointTime.Unix(), s.End, s.Extents) + s.Point
	}
	ka, kb := make([]string, len(a)), make([]string, len(b))
	for i := range a {
		ka[i], kb[i] = key(a[i]), key(b[i])
	}
	slices.Sort(ka)
	slices.Sort(kb)
	return slices.Equal(ka, kb)
}
