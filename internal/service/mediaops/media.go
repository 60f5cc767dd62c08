package mediaops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/media"
	"github.com/coffer-backup/coffer/internal/media/format"
	"github.com/coffer-backup/coffer/internal/media/volume"
	"github.com/coffer-backup/coffer/internal/mediacopy"
	"github.com/coffer-backup/coffer/internal/repo"
)

// MediaLabel labels a cartridge and records it in the media catalogue.
// Foreign allows overwriting a cartridge holding data that is not
// coffer's; coffer volumes are protected by their retention, WORM ones
// for ever.
func (s Ops) MediaLabel(ctx context.Context, call *api.MediaLabelInput, here MediaHere) (*api.MediaVolume, error) {
	return s.mediaLabel(ctx, call, here, nil)
}

func (s Ops) mediaLabel(ctx context.Context, call *api.MediaLabelInput, here MediaHere, handed mediaBook) (*api.MediaVolume, error) {
	in := call.Body
	if in.Barcode == "" || in.Pool == "" {
		return nil, service.Invalidf("--barcode and --pool are required")
	}
	at, err := s.locate(ctx, here.library(call.Library, here.Drive), handed)
	if err != nil {
		return nil, err
	}
	if at.worker != "" {
		res, rows, err := handOff[*api.MediaVolume](ctx, s, at, "media-label", call, nil)
		if err == nil && len(rows) == 1 {
			doc := volumeDoc(rows[0]) // as the server's catalogue holds it
			res = &doc
		}
		return res, err
	}
	lib, closeLib, err := at.ml.Open()
	if err != nil {
		return nil, err
	}
	defer s.closeLibrary(closeLib)
	if err := lib.Load(in.Barcode); err != nil {
		return nil, err
	}
	v, err := volume.Label(lib.Drive, volume.LabelOptions{Barcode: in.Barcode, Pool: in.Pool, BlockSize: in.BlockSizeBytes, Foreign: in.Foreign})
	if errors.Is(err, volume.ErrProtected) {
		return nil, api.Errorf(api.Invalid, "%v", err)
	}
	if err != nil {
		return nil, err
	}
	rows, err := at.book.record(ctx, lib, at.ml, v.Index)
	if err != nil {
		return nil, err
	}
	doc := volumeDoc(rows[0])
	return &doc, nil
}

// MediaCopy writes backup points to a media pool: each point a
// self-contained stream, several multiplexed onto the drive, spanning
// volumes of the pool; the volumes' indexes go into the media catalogue.
// Its Drives are the library's drive here.Drive and those after it.
func (s Ops) MediaCopy(ctx context.Context, call *api.MediaCopyInput, here MediaHere) (*api.MediaCopyResult, error) {
	in := call.Body
	if in.Pool == "" {
		return nil, service.Invalidf("--pool is required")
	}
	maxMux := cmp.Or(in.MaxMultiplex, volume.DefaultMultiplex)
	if in.Multiplex > maxMux {
		return nil, service.Invalidf("multiplexing %d:1 exceeds the cap of %d:1 (restores slow down beyond 4:1); raise --max-multiplex to allow it", in.Multiplex, maxMux)
	}
	if in.Drives < 0 {
		return nil, service.Invalidf("--drives must not be negative")
	}
	ml, err := s.resolveLibrary(ctx, here.library(call.Library, here.Drive))
	if err != nil {
		return nil, err
	}
	spec := service.WithDetail(s.RepoJob(job.KindMediaCopy, s.Config.Repository.Location), "to pool "+in.Pool+" of library "+ml.Ref())
	worker, err := s.libraryWorker(ctx, ml)
	if err != nil {
		return nil, err
	}
	if worker != "" {
		return s.copyOnWorker(ctx, worker, call, ml, spec)
	}
	return service.Run(ctx, s.Service, spec, func(ctx context.Context, t service.Job) (*api.MediaCopyResult, error) {
		return s.copyToMedia(ctx, t, call.Body, ml, here, s.mediaCatalogue(ctx, t), func(lib *volume.Library, ixs ...format.VolumeIndex) ([]catalog.MediaVolume, error) {
			return s.recordVolumes(ctx, lib, ml, ixs...)
		})
	})
}

// recorder records the volumes a copy wrote through one of its drives
// (lib) and returns their rows: in the media catalogue here, or, on a
// worker, for the server to record.
type recorder func(lib *volume.Library, ixs ...format.VolumeIndex) ([]catalog.MediaVolume, error)

// copyToMedia writes the points call selects to the pool through
// library ml's drives, choosing volumes by what catalogue knows of them,
// and records each drive's volumes with record.
func (s Ops) copyToMedia(ctx context.Context, t service.Job, in api.MediaCopyRequest, ml mediaLibrary, here MediaHere,
	catalogue map[string]volume.Catalogued, record recorder) (*api.MediaCopyResult, error) {
	maxMux := cmp.Or(in.MaxMultiplex, volume.DefaultMultiplex)
	return service.WithRepo(ctx, s.Service, service.DefaultRepo(), service.NoLease, func(src *repo.Repository) (*api.MediaCopyResult, error) {
		sel, err := service.CopySelection(ctx, src, api.CopyRequest{Points: in.Points, VM: in.VM, Latest: in.Latest})
		if err != nil {
			return nil, err
		}
		all, err := src.Points(ctx, nil)
		if err != nil {
			return nil, err
		}
		var snaps []*repo.Point
		for _, sn := range all {
			if sel(sn) {
				snaps = append(snaps, sn)
			}
		}
		if len(snaps) == 0 {
			return nil, api.Errorf(api.NotFound, "no backup point matches the selection")
		}
		drives := min(max(in.Drives, 1), len(snaps))
		mux := cmp.Or(in.Multiplex, min((len(snaps)+drives-1)/drives, maxMux))
		host, _ := os.Hostname()
		// The log says where the library was opened: on a worker, the
		// server's job says which worker, and this line is the worker's.
		t.Log(slog.LevelInfo, fmt.Sprintf("copying %d point(s) to pool %s of library %s through %d drive(s) on host %s", len(snaps), in.Pool, ml.Ref(), drives, host))
		libs, closeLib, err := ml.OpenDrives(drives)
		if err != nil {
			return nil, err
		}
		defer s.closeLibrary(closeLib)
		need, err := ml.driveSlots(libs[0])
		if err != nil {
			return nil, err
		}
		slots := &copySlots{limiter: s.Limiter(ctx), need: need, t: t, library: ml.Ref()}
		start := time.Now()
		results, copyErr := mediacopy.CopyOnDrives(ctx, src, snaps, libs, mediacopy.CopyOptions{Pool: in.Pool, BlockSize: in.BlockSizeBytes,
			SpoolDir: here.SpoolDir, Catalogue: catalogue, DriveSlot: slots.acquire,
			WriteOptions: volume.WriteOptions{Multiplex: mux, RunBlocks: in.RunBlocks, Retention: in.Retention(), Host: host}})
		// The sessions that completed are on tape and indexed: the
		// catalogue records them even when another drive failed.
		out := &api.MediaCopyResult{Sessions: []string{}, Drives: drives, DriveLimit: need.Cap,
			DrivesAtOnce: slots.mostAtOnce(), Copied: []string{}, Volumes: []api.MediaVolume{},
			Segments: []api.MediaSegment{}, NoIndex: []string{}, Multiplex: mux}
		for i, res := range results {
			if res == nil {
				continue // the drive failed: copyErr says how
			}
			rows, err := record(libs[i], res.Volumes...)
			if err != nil {
				return nil, errors.Join(copyErr, err)
			}
			session := res.Session.String()
			out.Sessions = append(out.Sessions, session)
			out.Blocks += res.Blocks
			out.DataBytes += res.Bytes
			out.NoIndex = append(out.NoIndex, res.NoIndex...)
			for j, ix := range res.Volumes {
				out.Volumes = append(out.Volumes, volumeDoc(rows[j]))
				for _, r := range segmentRows(ix) {
					if r.Session == session {
						out.Segments = append(out.Segments, segmentDoc(r))
					}
				}
			}
		}
		out.DurationSeconds = time.Since(start).Seconds()
		if copyErr != nil {
			return nil, copyErr
		}
		for _, sn := range snaps {
			out.Copied = append(out.Copied, sn.ID.String())
		}
		return out, nil
	})
}

// mediaCatalogue is what the media catalogue knows of each volume, for
// a copy to choose its volume without loading every cartridge; nil (each
// cartridge is then read in turn) when the catalogue cannot be read.
func (s Ops) mediaCatalogue(ctx context.Context, t service.Job) map[string]volume.Catalogued {
	c, err := s.OpenCatalog(ctx)
	if err != nil {
		t.Log(slog.LevelWarn, "the media catalogue is not readable: each cartridge is loaded in turn to find the pool's volumes", "err", err)
		return nil
	}
	defer c.Close()
	known, err := c.ListMediaVolumes(ctx, "")
	if err != nil {
		t.Log(slog.LevelWarn, "the media catalogue is not readable: each cartridge is loaded in turn to find the pool's volumes", "err", err)
		return nil
	}
	out := make(map[string]volume.Catalogued, len(known))
	for _, v := range known {
		out[v.Barcode] = volume.Catalogued{Pool: v.Pool, Full: v.Full}
	}
	return out
}

// recordVolumes writes volumes' indexes into the media catalogue, each
// with whether its cartridge is WORM, and returns the rows written. A
// volume filled by a session appears twice (full, then as continued
// elsewhere): the last index of each barcode wins.
func (s Ops) recordVolumes(ctx context.Context, lib *volume.Library, ml mediaLibrary, ixs ...format.VolumeIndex) ([]catalog.MediaVolume, error) {
	return s.recordIndexes(ctx, ml, ixs, func(barcode string) bool { return cartridgeWORM(lib, barcode) })
}

// recordIndexes is recordVolumes with what the library says of each
// cartridge's WORM (cartridgeWORM) as worm.
func (s Ops) recordIndexes(ctx context.Context, ml mediaLibrary, ixs []format.VolumeIndex, worm func(barcode string) bool) ([]catalog.MediaVolume, error) {
	c, err := s.OpenCatalog(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	known, err := c.ListMediaVolumes(ctx, "")
	if err != nil {
		return nil, err
	}
	wasWORM := map[string]bool{}
	for _, v := range known {
		wasWORM[v.Barcode] = v.WORM
	}
	rows := make([]catalog.MediaVolume, 0, len(ixs))
	for _, ix := range ixs {
		row := volumeRow(ix, ml.Ref())
		row.WORM = wasWORM[row.Barcode] || worm(row.Barcode)
		if err := c.ReplaceMediaVolume(ctx, row, segmentRows(ix)); err != nil {
			return nil, err
		}
		row.Segments = len(ix.Segments)
		rows = append(rows, row)
	}
	return rows, nil
}

// MediaCatalog mounts every cartridge of the library and records what its
// last index (or, with Scan, its blocks) says: the catalogue is rebuilt
// from the media alone. Scan reads every block instead of each volume's
// last index (for volumes whose index is missing: an unexpected end of
// medium, or a damaged index).
func (s Ops) MediaCatalog(ctx context.Context, call *api.RebuildMediaCatalogInput, here MediaHere) (*api.MediaCatalogResult, error) {
	return s.mediaCatalog(ctx, call, here, nil)
}

func (s Ops) mediaCatalog(ctx context.Context, call *api.RebuildMediaCatalogInput, here MediaHere, handed mediaBook) (*api.MediaCatalogResult, error) {
	in := call.Body
	at, err := s.locate(ctx, here.library(call.Library, here.Drive), handed)
	if err != nil {
		return nil, err
	}
	if at.worker != "" {
		res, rows, err := handOff[*api.MediaCatalogResult](ctx, s, at, "rebuild-media-catalog", call, nil)
		if res != nil {
			res.Volumes = make([]api.MediaVolume, 0, len(rows)) // as the server's catalogue holds them
			for _, r := range rows {
				res.Volumes = append(res.Volumes, volumeDoc(r))
			}
		}
		return res, err
	}
	lib, closeLib, err := at.ml.Open()
	if err != nil {
		return nil, err
	}
	defer s.closeLibrary(closeLib)
	codes, err := lib.Barcodes()
	if err != nil {
		return nil, err
	}
	out := &api.MediaCatalogResult{Volumes: []api.MediaVolume{}, Skipped: []api.MediaSkipped{}}
	for _, bc := range codes {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		v, err := lib.Mount(ctx, bc)
		if errors.Is(err, media.ErrNoDrive) {
			return out, err // every cartridge would be skipped alike
		}
		if err != nil {
			out.Skipped = append(out.Skipped, api.MediaSkipped{Barcode: bc, Reason: err.Error()})
			continue
		}
		ix := v.Index
		if in.Scan {
			rep, err := v.Scan()
			if err != nil {
				out.Skipped = append(out.Skipped, api.MediaSkipped{Barcode: bc, Reason: err.Error()})
				continue
			}
			ix.Segments = rep.Scanned
		}
		rows, err := at.book.record(ctx, lib, at.ml, ix)
		if err != nil {
			return out, err
		}
		out.Volumes = append(out.Volumes, volumeDoc(rows[0]))
	}
	return out, nil
}

// mediaVolumes lists the catalogue's volumes (of one pool, if given).
func (s Ops) mediaVolumes(ctx context.Context, pool string) ([]api.MediaVolume, error) {
	c, err := s.OpenCatalog(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	vols, err := c.ListMediaVolumes(ctx, pool)
	if err != nil {
		return nil, err
	}
	out := make([]api.MediaVolume, 0, len(vols))
	for _, v := range vols {
		out = append(out, volumeDoc(v))
	}
	return out, nil
}

// mediaContents lists the catalogue's segments: of a volume, of a point
// (an ID or a unique prefix), or all.
func (s Ops) mediaContents(ctx context.Context, barcode, point string) ([]api.MediaSegment, error) {
	c, err := s.OpenCatalog(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	rows, err := pointSegments(ctx, c, barcode, point)
	if err != nil {
		return nil, err
	}
	out := make([]api.MediaSegment, 0, len(rows))
	for _, r := range rows {
		out = append(out, segmentDoc(r))
	}
	return out, nil
}

// pointSegments lists segments of a volume and/or of the one point a
// reference (ID or unique prefix) names.
func pointSegments(ctx context.Context, c catalog.Catalog, barcode, point string) ([]catalog.MediaSegment, error) {
	rows, err := c.ListMediaSegments(ctx, catalog.MediaSegmentFilter{Barcode: barcode})
	if err != nil {
		return nil, err
	}
	return pickPoint(rows, point)
}

// pickPoint keeps the rows of the one point a reference (ID or unique
// prefix) names; all of them when it names none.
func pickPoint(rows []catalog.MediaSegment, point string) ([]catalog.MediaSegment, error) {
	if point == "" {
		return rows, nil
	}
	var out []catalog.MediaSegment
	match := ""
	for _, r := range rows {
		if len(point) <= len(r.Point) && r.Point[:len(point)] == point {
			if match != "" && match != r.Point {
				return nil, service.Invalidf("%q names several backup points on media (%s, %s): give more of the ID", point, match, r.Point)
			}
			match = r.Point
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		return nil, api.Errorf(api.NotFound, "no backup point %q in the media catalogue (run coffer media catalog to rebuild it from the tapes)", point)
	}
	return out, nil
}
