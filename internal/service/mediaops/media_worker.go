package mediaops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/media/format"
	"github.com/coffer-backup/coffer/internal/media/volume"
)

// A copy to a library attached to a worker's host (its
// --reach-libraries) runs on that worker, handed off by ID
// (MediaCopyOnWorkerOperation), as the library's other operations do
// (media_handoff.go): the server keeps the media catalogue, which a
// worker's role may not write, and records what the worker wrote.

// workerChooser is the fleet's choice of a worker (fleet.Remote, the
// process's service.Remote on a server with workers): see
// fleet.Remote.ChooseWorker.
type workerChooser interface {
	ChooseWorker(ctx context.Context, rt engine.Route, optional bool) (string, error)
}

// libraryWorker is the worker that opens library ml: "" when this
// process may (no fleet, a library no worker reaches, one named by a
// path), an error when workers reach it and none is ready.
func (s Ops) libraryWorker(ctx context.Context, ml mediaLibrary) (string, error) {
	c, _ := s.RemoteRunner().(workerChooser)
	if c == nil || ml.Name == "" {
		return "", nil
	}
	return c.ChooseWorker(ctx, engine.Route{Library: ml.Name}, false)
}

// MediaCopyOnWorkerOperation writes a copy to tape on the worker the
// library is attached to (Ops.MediaCopyOnWorker). It is internal
// (service.Operation.Internal): no face offers it.
const MediaCopyOnWorkerOperation = "media-copy-on-worker"

// CopyOnWorkerInput is the input of MediaCopyOnWorkerOperation: the
// request, and what the server's media catalogue knows of each volume.
type CopyOnWorkerInput struct {
	Call      api.MediaCopyInput           `json:"call"`
	Catalogue map[string]volume.Catalogued `json:"catalogue,omitempty"`
}

// CopiedOnWorker is its document: the copy's result, and each volume it
// wrote (in the result's order) for the server to record.
type CopiedOnWorker struct {
	Result  *api.MediaCopyResult `json:"result,omitempty"`
	Volumes []WrittenVolume      `json:"volumes"`
}

// WrittenVolume is a volume's index as its drive closed it, and whether
// its cartridge is WORM, which only the library's host can tell.
type WrittenVolume struct {
	Index format.VolumeIndex `json:"index"`
	WORM  bool               `json:"worm,omitempty"`
}

// MediaCopyOnWorker runs a server's copy to tape on this worker, where
// the library is attached. It records nothing in the media catalogue:
// the volumes written come back, with the result, even beside an error
// (the sessions that completed are on tape).
func (s Ops) MediaCopyOnWorker(ctx context.Context, in *CopyOnWorkerInput) (*CopiedOnWorker, error) {
	ml, err := s.resolveLibrary(ctx, MediaLibraryInput{Library: in.Call.Library, Configured: true})
	if err != nil {
		return nil, err
	}
	spec := service.WithDetail(s.RepoJob(catalog.KindMediaCopy, s.Config.Repository.Location), "to pool "+in.Call.Body.Pool+" of library "+ml.Ref())
	return service.Run(ctx, s.Service, spec, func(ctx context.Context, t service.Job) (*CopiedOnWorker, error) {
		book := &handedBook{written: []WrittenVolume{}}
		res, err := s.copyToMedia(ctx, t, in.Call.Body, ml, MediaHere{}, in.Catalogue, func(lib *volume.Library, ixs ...format.VolumeIndex) ([]catalog.MediaVolume, error) {
			return book.record(ctx, lib, ml, ixs...)
		})
		return &CopiedOnWorker{Result: res, Volumes: book.written}, err
	})
}

// copyOnWorker hands a copy to library ml to worker, which it is
// attached to, and records in the media catalogue the volumes the worker
// wrote: the job is this process's, as for a restore on a worker.
func (s Ops) copyOnWorker(ctx context.Context, worker string, call *api.MediaCopyInput, ml mediaLibrary, spec service.JobSpec) (*api.MediaCopyResult, error) {
	return service.Run(ctx, s.Service, spec, func(ctx context.Context, t service.Job) (*api.MediaCopyResult, error) {
		t.Log(slog.LevelInfo, fmt.Sprintf("media-copy runs on worker %s, where library %s is attached", worker, ml.Name), "worker", worker)
		doc, err := s.RemoteRunner().RunOn(ctx, worker, MediaCopyOnWorkerOperation, &CopyOnWorkerInput{Call: *call, Catalogue: s.mediaCatalogue(ctx, t)})
		var out CopiedOnWorker
		if len(doc) > 0 && string(doc) != "null" {
			if jerr := json.Unmarshal(doc, &out); jerr != nil {
				return nil, api.WithClass(api.Internal, fmt.Errorf("worker %s's answer to media-copy: %w", worker, jerr))
			}
		}
		rows, rerr := s.recordWritten(ctx, ml, out.Volumes)
		switch {
		case rerr != nil:
			return nil, errors.Join(err, rerr)
		case err != nil:
			return nil, err
		case out.Result == nil:
			return nil, api.WithClass(api.Internal, fmt.Errorf("worker %s answered media-copy without a result", worker))
		}
		res := out.Result
		res.Volumes = make([]api.MediaVolume, 0, len(rows))
		for _, r := range rows {
			res.Volumes = append(res.Volumes, volumeDoc(r))
		}
		return res, nil
	})
}
