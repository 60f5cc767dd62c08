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
	"github.com/coffer-backup/coffer/internal/media/format"
	"github.com/coffer-backup/coffer/internal/media/volume"
)

// A library attached to a worker's host is opened there only. An
// operation on it that a server receives (its status, a cartridge's
// move, label, verify, restore, file extraction, catalogue rebuild) is
// handed to that worker by ID (MediaOnWorkerOperation): the server sends
// the media catalogue's rows the operation reads, the worker runs it and
// returns its result with the volumes whose indexes it wrote, and the
// server records those in the media catalogue, which a worker's role may
// neither read nor write. Copies go the same way (media_worker.go).

// mediaBook is the media catalogue as an operation on a library reads
// and writes it: the catalogue itself here (catalogBook), or, on a
// worker running a server's hand-off, the rows the server sent and the
// volumes to send back (handedBook).
type mediaBook interface {
	// segments are the rows of a volume and/or of the one point that a
	// reference (ID or unique prefix) names (pointSegments).
	segments(ctx context.Context, barcode, point string) ([]catalog.MediaSegment, error)
	// record records volumes' indexes read or written through lib, and
	// returns their rows (recordVolumes).
	record(ctx context.Context, lib *volume.Library, ml mediaLibrary, ixs ...format.VolumeIndex) ([]catalog.MediaVolume, error)
}

// catalogBook is this process's media catalogue.
type catalogBook struct{ s Ops }

func (b catalogBook) segments(ctx context.Context, barcode, point string) ([]catalog.MediaSegment, error) {
	c, err := b.s.OpenCatalog(ctx)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	rows, err := c.ListMediaSegments(ctx, catalog.MediaSegmentFilter{Barcode: barcode})
	if err != nil {
		return nil, err
	}
	return pickPoint(rows, point)
}

func (b catalogBook) record(ctx context.Context, lib *volume.Library, ml mediaLibrary, ixs ...format.VolumeIndex) ([]catalog.MediaVolume, error) {
	return b.s.recordVolumes(ctx, lib, ml, ixs...)
}

// handedBook is a worker's view of the server's media catalogue: the
// rows the server sent with the operation, and the volumes the
// operation wrote or read, for the server to record.
type handedBook struct {
	rows    []catalog.MediaSegment
	written []WrittenVolume
}

func (b *handedBook) segments(_ context.Context, barcode, point string) ([]catalog.MediaSegment, error) {
	var rows []catalog.MediaSegment
	for _, r := range b.rows {
		if barcode == "" || r.Barcode == barcode {
			rows = append(rows, r)
		}
	}
	return pickPoint(rows, point)
}

func (b *handedBook) record(_ context.Context, lib *volume.Library, ml mediaLibrary, ixs ...format.VolumeIndex) ([]catalog.MediaVolume, error) {
	rows := make([]catalog.MediaVolume, 0, len(ixs))
	for _, ix := range ixs {
		w := WrittenVolume{Index: ix, WORM: cartridgeWORM(lib, ix.Label.Barcode)}
		b.written = append(b.written, w)
		row := volumeRow(ix, ml.Ref())
		row.WORM, row.Segments = w.WORM, len(ix.Segments)
		rows = append(rows, row)
	}
	return rows, nil
}

// libraryAt is where an operation on a library runs: the worker it is
// handed to, or this process with book.
type libraryAt struct {
	ml     mediaLibrary
	worker string
	book   mediaBook
}

// locate resolves the library an operation names and where it runs. A
// worker running a server's hand-off passes the server's rows (handed)
// and runs it; otherwise it runs on the library's worker, if a worker
// reaches it, else here with the media catalogue.
func (s Ops) locate(ctx context.Context, in MediaLibraryInput, handed mediaBook) (libraryAt, error) {
	ml, err := s.resolveLibrary(ctx, in)
	if err != nil {
		return libraryAt{ml: ml}, err
	}
	if handed != nil {
		return libraryAt{ml: ml, book: handed}, nil
	}
	worker, err := s.libraryWorker(ctx, ml)
	if err != nil {
		return libraryAt{ml: ml}, err
	}
	return libraryAt{ml: ml, worker: worker, book: catalogBook{s}}, nil
}

// MediaOnWorkerOperation runs an operation on a library on the worker it
// is attached to (Ops.MediaOnWorker). It is internal
// (service.Operation.Internal): no face offers it.
const MediaOnWorkerOperation = "media-on-worker"

// OnWorkerInput is its input: the operation's ID and input, as the
// server received them, and the media catalogue's rows it reads.
type OnWorkerInput struct {
	Operation string                 `json:"operation"`
	Call      json.RawMessage        `json:"call"`
	Segments  []catalog.MediaSegment `json:"segments,omitempty"`
}

// OnWorkerOutput is its document: the operation's result, and the
// volumes whose indexes it wrote or read, for the server to record.
type OnWorkerOutput struct {
	Result  json.RawMessage `json:"result,omitempty"`
	Volumes []WrittenVolume `json:"volumes"`
}

// handedOps are the operations MediaOnWorker runs, by ID.
var handedOps = map[string]func(Ops, context.Context, json.RawMessage, mediaBook) (any, error){
	"media-library-status":  handed(Ops.mediaLibraryStatus),
	"media-load":            handed(Ops.mediaLoad),
	"media-unload":          handed(Ops.mediaUnload),
	"media-label":           handed(Ops.mediaLabel),
	"media-restore":         handed(Ops.mediaRestore),
	"media-files-extract":   handed(Ops.mediaFilesExtract),
	"media-verify":          handed(Ops.mediaVerify),
	"rebuild-media-catalog": handed(Ops.mediaCatalog),
}

// handed runs an operation's method with a server's input, as served
// (MediaHere{}: the worker's configured library, its restore directory).
func handed[I, T any](m func(Ops, context.Context, *I, MediaHere, mediaBook) (T, error)) func(Ops, context.Context, json.RawMessage, mediaBook) (any, error) {
	return func(s Ops, ctx context.Context, call json.RawMessage, book mediaBook) (any, error) {
		in := new(I)
		if err := json.Unmarshal(call, in); err != nil {
			return nil, api.Errorf(api.Invalid, "the input of the operation handed to this worker: %v", err)
		}
		return m(s, ctx, in, MediaHere{}, book)
	}
}

// MediaOnWorker runs a server's operation on a library attached to this
// worker. It records nothing in the media catalogue: the volumes whose
// indexes it wrote or read come back with the result, even beside an
// error (a rebuild that stopped part way found some).
func (s Ops) MediaOnWorker(ctx context.Context, in *OnWorkerInput) (*OnWorkerOutput, error) {
	run, ok := handedOps[in.Operation]
	if !ok {
		return nil, api.Errorf(api.Invalid, "%q is no media operation a worker runs for a server", in.Operation)
	}
	// The server's job (if the operation is one) says which worker ran
	// it; the worker's own log says what it ran.
	s.Logger().Info("a server's media operation runs here", "operation", in.Operation)
	book := &handedBook{rows: in.Segments}
	res, err := run(s, ctx, in.Call, book)
	out := &OnWorkerOutput{Volumes: book.written}
	if out.Volumes == nil {
		out.Volumes = []WrittenVolume{}
	}
	doc, merr := json.Marshal(res)
	if merr != nil {
		return out, errors.Join(err, api.WithClass(api.Internal, fmt.Errorf("%s's result: %w", in.Operation, merr)))
	}
	out.Result = doc
	return out, err
}

// handOff runs operation id with input call on at's worker, sending it
// rows of the media catalogue, and records in the media catalogue the
// volumes it returns; it returns the operation's result (which may come
// beside an error) and the rows recorded.
func handOff[T any](ctx context.Context, s Ops, at libraryAt, id string, call any, rows []catalog.MediaSegment) (T, []catalog.MediaVolume, error) {
	var res T
	raw, err := json.Marshal(call)
	if err != nil {
		return res, nil, api.WithClass(api.Internal, fmt.Errorf("%s's input: %w", id, err))
	}
	doc, err := s.RemoteRunner().RunOn(ctx, at.worker, MediaOnWorkerOperation, &OnWorkerInput{Operation: id, Call: raw, Segments: rows})
	var out OnWorkerOutput
	if len(doc) > 0 && string(doc) != "null" {
		if jerr := json.Unmarshal(doc, &out); jerr != nil {
			return res, nil, errors.Join(err, api.WithClass(api.Internal, fmt.Errorf("worker %s's answer to %s: %w", at.worker, id, jerr)))
		}
	}
	recorded, rerr := s.recordWritten(ctx, at.ml, out.Volumes)
	if len(out.Result) > 0 && string(out.Result) != "null" {
		if jerr := json.Unmarshal(out.Result, &res); jerr != nil {
			return res, recorded, errors.Join(err, rerr, api.WithClass(api.Internal, fmt.Errorf("worker %s's result of %s: %w", at.worker, id, jerr)))
		}
	}
	return res, recorded, errors.Join(err, rerr)
}

// recordWritten records in the media catalogue the volumes a worker
// wrote or read through library ml.
func (s Ops) recordWritten(ctx context.Context, ml mediaLibrary, vols []WrittenVolume) ([]catalog.MediaVolume, error) {
	if len(vols) == 0 {
		return nil, nil
	}
	ixs := make([]format.VolumeIndex, len(vols))
	worm := map[string]bool{}
	for i, v := range vols {
		ixs[i] = v.Index
		worm[v.Index.Label.Barcode] = worm[v.Index.Label.Barcode] || v.WORM
	}
	return s.recordIndexes(ctx, ml, ixs, func(barcode string) bool { return worm[barcode] })
}

// logOnWorker says in a job's log that operation id runs on at's
// worker.
func logOnWorker(t service.Job, id string, at libraryAt) {
	t.Log(slog.LevelInfo, fmt.Sprintf("%s runs on worker %s, where library %s is attached", id, at.worker, at.ml.Name), "worker", at.worker)
}

// handOffJob is handOff for an operation recorded as a job (t): the job
// says which worker ran it, and the worker gets the media catalogue's
// rows of the volume (barcode) or point the operation reads.
func handOffJob[T any](ctx context.Context, s Ops, t service.Job, at libraryAt, id string, call any, barcode, point string) (T, error) {
	logOnWorker(t, id, at)
	rows, err := at.book.segments(ctx, barcode, point)
	if err != nil {
		var none T
		return none, err
	}
	res, _, err := handOff[T](ctx, s, at, id, call, rows)
	return res, err
}
