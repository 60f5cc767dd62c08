package backupops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/measure"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/taskstarted"
)

// StartBenchPipeline measures coffer's pipeline on the server's host as a
// task: it answers at once with the running task, and the measurement
// goes on in the server's background (a measurement of 1 TiB takes
// hours; bench-pipeline answers only at its end). The results are in the
// task's log, where the planner reads them once it has succeeded.
// Options it cannot measure are refused before any task starts.
func (s Ops) StartBenchPipeline(ctx context.Context, call *api.StartBenchPipelineInput) (*api.Job, error) {
	o, err := pipelineOptions(call.Body)
	if err != nil {
		return nil, err
	}
	bg, err := s.Background("a pipeline measurement run as a task")
	if err != nil {
		return nil, err
	}
	if err := pipelineTask.claim(); err != nil {
		return nil, err
	}
	started := make(chan int64, 1)
	err = bg.Work(ctx, func(ctx context.Context) {
		defer pipelineTask.set(0)
		var id int64
		ctx = taskstarted.With(ctx, func(n int64) { id = n })
		ctx, t := s.StartJob(ctx, service.JobSpec{Kind: catalog.KindBenchPipeline, Object: measure.Object})
		pipelineTask.set(id)
		started <- id // StartJob names the task before it returns; 0: not recorded
		if id == 0 {
			t.Finish(errNotRecorded)
			return
		}
		t.Finish(s.measurePipelineIn(ctx, t, id, o))
	})
	if err != nil {
		pipelineTask.set(0)
		return nil, err
	}
	id := <-started
	if id == 0 {
		return nil, errNotRecorded
	}
	return s.JobPage(ctx, service.JobPageInput{ID: id})
}

// pipelineTask is the measurement this process runs as a task: one at a
// time, as two side by side would measure each other.
var pipelineTask runningTask

type runningTask struct {
	mu sync.Mutex
	id int64 // the task's ID; -1 while it starts; 0: none
}

// claim reserves the measurement, or refuses while one runs.
func (r *runningTask) claim() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.id > 0:
		return api.Errorf(api.Conflict, "the server is measuring its pipeline already (task %d): wait for it to end", r.id)
	case r.id < 0:
		return api.Errorf(api.Conflict, "the server is starting a measurement of its pipeline already")
	}
	r.id = -1
	return nil
}

func (r *runningTask) set(id int64) {
	r.mu.Lock()
	r.id = id
	r.mu.Unlock()
}

// errNotRecorded: the server could not record the task, so its results
// could be read nowhere (the server's log says why).
var errNotRecorded = errors.New("the measurement cannot be recorded as a task in the catalog: see the server's log")

// pipelineOptions checks what a request asks to measure.
func pipelineOptions(in api.PipelineBenchRequest) (measure.PipelineOptions, error) {
	if in.SizeBytes < 0 || in.Workers < 0 {
		return measure.PipelineOptions{}, service.Invalidf("bytes and workers cannot be negative")
	}
	levels := in.Levels
	if len(levels) == 0 {
		levels = nil // the default levels
	}
	o, err := measure.PipelineOptions{Levels: levels, Bytes: in.SizeBytes, Workers: in.Workers}.Checked()
	if err != nil {
		return o, service.Invalidf("%v", err)
	}
	return o, nil
}

// measurePipelineIn measures the pipeline in the task t and records the
// results in its log.
func (s Ops) measurePipelineIn(ctx context.Context, t service.Job, id int64, o measure.PipelineOptions) error {
	t.Log(slog.LevelInfo, fmt.Sprintf("measuring the pipeline at levels %v, %d bytes each, %d workers", o.Levels, o.Bytes, o.Workers))
	rs, err := measure.Pipeline(ctx, o)
	if err != nil {
		return err
	}
	return s.withCatalog(ctx, func(cat catalog.Catalog) error {
		return measure.RecordPipelineIn(ctx, cat, id, rs)
	})
}
