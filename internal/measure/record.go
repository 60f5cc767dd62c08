package measure

import (
	"context"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// A measurement is recorded in the catalog as a finished job (of kind
// bench-device or bench-pipeline, by the host that measured, at the time
// it did) whose log holds one "bench-result" event per result: the
// catalog's history of jobs keeps them, with no table of their own.
const resultEvent = "bench-result"

// Object is the ACL object measurements are recorded on.
const Object = "/system"

// DeviceRecord is a stored device measurement.
type DeviceRecord struct {
	DeviceResult
	// Device is the key the planner knows the device by:
	// "datastore:CONN/DS" or "repo:NAME" (or the directory, for a
	// device of neither).
	Device string
	Host   string
	At     time.Time
}

// PipelineRecord is a stored pipeline measurement.
type PipelineRecord struct {
	Results []PipelineResult
	Host    string
	At      time.Time
}

// RecordDevice stores a device measurement.
func RecordDevice(ctx context.Context, cat catalog.Catalog, r DeviceRecord) error {
	f := map[string]any{"device": r.Device, "dir": r.Dir, "streams": r.Streams, "size": r.Size, "read": r.Read, "write": r.Write,
		"duplex_read": r.DuplexRead, "duplex_write": r.DuplexWrite}
	msg := fmt.Sprintf("%s (%s): read %.0f MB/s, write %.0f MB/s, both at once %.0f + %.0f MB/s, %d streams",
		r.Device, r.Dir, r.Read/1e6, r.Write/1e6, r.DuplexRead/1e6, r.DuplexWrite/1e6, r.Streams)
	return record(ctx, cat, catalog.KindBenchDevice, r.Host, r.At, []catalog.Event{{Kind: resultEvent, Level: "info", Message: msg, Fields: f}})
}

// RecordPipeline stores a pipeline measurement.
func RecordPipeline(ctx context.Context, cat catalog.Catalog, r PipelineRecord) error {
	return record(ctx, cat, catalog.KindBenchPipeline, r.Host, r.At, pipelineEvents(r.Results))
}

// RecordPipelineIn stores a pipeline measurement in the log of the
// running job jobID, of kind bench-pipeline, that measured it (a
// measurement run as a task): once that job has ended in success, Latest
// reads it like one RecordPipeline stored.
func RecordPipelineIn(ctx context.Context, cat catalog.Catalog, jobID int64, results []PipelineResult) error {
	evs := pipelineEvents(results)
	now := time.Now().UTC()
	for i := range evs {
		evs[i].JobID, evs[i].Time = jobID, now
	}
	if err := cat.AddEvents(ctx, evs); err != nil {
		return fmt.Errorf("record the measurement: %w", err)
	}
	return nil
}

func pipelineEvents(results []PipelineResult) []catalog.Event {
	var evs []catalog.Event
	for _, p := range results {
		evs = append(evs, catalog.Event{Kind: resultEvent, Level: "info",
			Message: fmt.Sprintf("level %d: %.0f MB/s with %d workers, %.0f MB/s per core, stored ratio %.3f", p.Level, p.Rate/1e6, p.Workers, p.PerCore/1e6, p.StoredRatio),
			Fields:  map[string]any{"level": p.Level, "workers": p.Workers, "rate": p.Rate, "per_core": p.PerCore, "stored_ratio": p.StoredRatio}})
	}
	return evs
}

func record(ctx context.Context, cat catalog.Catalog, kind, host string, at time.Time, evs []catalog.Event) error {
	j := &catalog.Job{Kind: kind, Object: Object, Status: catalog.StatusSuccess, Worker: host, CreatedAt: at, StartedAt: at, FinishedAt: at}
	if err := cat.CreateJob(ctx, j); err != nil {
		return fmt.Errorf("record the measurement: %w", err)
	}
	for i := range evs {
		evs[i].JobID, evs[i].Time = j.ID, at
	}
	if err := cat.AddEvents(ctx, evs); err != nil {
		return fmt.Errorf("record the measurement: %w", err)
	}
	return nil
}

// Latest reads the newest measurement of each device (by device key)
// and the newest pipeline measurement (nil when none) from the newest
// `jobs` measurements of each kind.
func Latest(ctx context.Context, cat catalog.Catalog, jobs int) (map[string]DeviceRecord, *PipelineRecord, error) {
	devices := map[string]DeviceRecord{}
	list, err := cat.ListJobs(ctx, catalog.JobFilter{Kind: catalog.KindBenchDevice, Status: catalog.StatusSuccess, Limit: jobs})
	if err != nil {
		return nil, nil, fmt.Errorf("read the measurements: %w", err)
	}
	for _, j := range list { // newest first: the first of a device is kept
		evs, err := cat.ListEvents(ctx, catalog.EventFilter{JobID: j.ID})
		if err != nil {
			return nil, nil, fmt.Errorf("read the measurements: %w", err)
		}
		for _, e := range evs {
			dev, _ := e.Fields["device"].(string)
			if e.Kind != resultEvent || dev == "" {
				continue
			}
			if _, ok := devices[dev]; ok {
				continue
			}
			dir, _ := e.Fields["dir"].(string)
			devices[dev] = DeviceRecord{Device: dev, Host: j.Worker, At: j.CreatedAt, DeviceResult: DeviceResult{Dir: dir,
				Streams: int(num(e.Fields, "streams")), Size: int64(num(e.Fields, "size")), Read: num(e.Fields, "read"), Write: num(e.Fields, "write"),
				DuplexRead: num(e.Fields, "duplex_read"), DuplexWrite: num(e.Fields, "duplex_write")}}
		}
	}
	list, err = cat.ListJobs(ctx, catalog.JobFilter{Kind: catalog.KindBenchPipeline, Status: catalog.StatusSuccess, Limit: 1})
	if err != nil || len(list) == 0 {
		return devices, nil, err
	}
	evs, err := cat.ListEvents(ctx, catalog.EventFilter{JobID: list[0].ID})
	if err != nil {
		return nil, nil, fmt.Errorf("read the measurements: %w", err)
	}
	p := &PipelineRecord{Host: list[0].Worker, At: list[0].CreatedAt}
	for i := len(evs) - 1; i >= 0; i-- { // events are newest first: back to the order measured
		e := evs[i]
		if e.Kind != resultEvent {
			continue
		}
		p.Results = append(p.Results, PipelineResult{Level: int(num(e.Fields, "level")), Workers: int(num(e.Fields, "workers")),
			Rate: num(e.Fields, "rate"), PerCore: num(e.Fields, "per_core"), StoredRatio: num(e.Fields, "stored_ratio")})
	}
	return devices, p, nil
}

func num(f map[string]any, k string) float64 {
	v, _ := f[k].(float64)
	return v
}

// Level returns the pipeline's rate at a zstd level: the level measured, or
// else the nearest one measured above it (slower, so the plan errs long).
func (p *PipelineRecord) Level(level int) (PipelineResult, bool) {
	var best *PipelineResult
	for i, r := range p.Results {
		if r.Level == level {
			return r, true
		}
		if r.Level > level && (best == nil || r.Level < best.Level) {
			best = &p.Results[i]
		}
	}
	if best == nil {
		return PipelineResult{}, false
	}
	return *best, true
}
