package backupops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"cmp"
	"context"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/measure"
)

// BenchDevice measures a device of this host through a directory on it
// (internal/measure) and records the result in the catalog.
func (s Ops) BenchDevice(ctx context.Context, call *api.BenchDeviceInput) (*api.DeviceBench, error) {
	in := call.Body
	if in.Path == "" {
		return nil, service.Invalidf("give a directory on the device to measure")
	}
	if in.Device != "" && !strings.HasPrefix(in.Device, "datastore:") && !strings.HasPrefix(in.Device, "repo:") {
		return nil, service.Invalidf("device %q: name it datastore:CONNECTION/DATASTORE or repo:REPOSITORY, as the planner knows it", in.Device)
	}
	if in.SizeBytes < 0 || in.Streams < 0 {
		return nil, service.Invalidf("size and streams cannot be negative")
	}
	r, err := measure.Device(ctx, measure.DeviceOptions{Dir: in.Path, Size: in.SizeBytes, Streams: in.Streams})
	if err != nil {
		if ctx.Err() == nil {
			return nil, service.Invalidf("%v", err)
		}
		return nil, err
	}
	rec := measure.DeviceRecord{DeviceResult: r, Device: cmp.Or(in.Device, "path:"+in.Path), Host: service.Hostname(), At: time.Now().UTC()}
	if err := s.withCatalog(ctx, func(cat catalog.Catalog) error { return measure.RecordDevice(ctx, cat, rec) }); err != nil {
		return nil, err
	}
	return &api.DeviceBench{Device: rec.Device, Path: r.Dir, Host: rec.Host, Time: rec.At, Streams: r.Streams, SizeBytes: r.Size,
		ReadBytesPerSecond: r.Read, WriteBytesPerSecond: r.Write, DuplexReadBytesPerSecond: r.DuplexRead, DuplexWriteBytesPerSecond: r.DuplexWrite}, nil
}

// BenchPipeline measures coffer's pipeline on this host at each zstd
// level and records the result in the catalog.
func (s Ops) BenchPipeline(ctx context.Context, call *api.BenchPipelineInput) (*api.PipelineBench, error) {
	o, err := pipelineOptions(call.Body)
	if err != nil {
		return nil, err
	}
	rs, err := measure.Pipeline(ctx, o)
	if err != nil {
		return nil, err
	}
	rec := measure.PipelineRecord{Results: rs, Host: service.Hostname(), At: time.Now().UTC()}
	if err := s.withCatalog(ctx, func(cat catalog.Catalog) error { return measure.RecordPipeline(ctx, cat, rec) }); err != nil {
		return nil, err
	}
	doc := &api.PipelineBench{Host: rec.Host, Time: rec.At, Levels: []api.PipelineLevel{}}
	for _, r := range rs {
		doc.Levels = append(doc.Levels, api.PipelineLevel{Level: r.Level, Workers: r.Workers, RateBytesPerSecond: r.Rate,
			PerCoreBytesPerSecond: r.PerCore, StoredRatio: r.StoredRatio})
	}
	return doc, nil
}

// withCatalog runs f with the catalog open.
func (s Ops) withCatalog(ctx context.Context, f func(catalog.Catalog) error) error {
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		return err
	}
	defer cat.Close()
	return f(cat)
}
