package catalogtest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// Sizes of one benchmark round: a job of 10,000 VM tasks that logs
// 100,000 events, written in the batches the engine uses.
const (
	benchTasks      = 10_000
	benchEvents     = 100_000
	benchTaskBatch  = 100
	benchEventBatch = 1_000
)

// BenchmarkWrites measures batched inserts of tasks and events and reports
// rows per second of each.
func BenchmarkWrites(b *testing.B, open Opener) {
	ctx := context.Background()
	c, err := open(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	var taskTime, eventTime time.Duration
	rounds := 0
	for b.Loop() {
		rounds++
		j := &catalog.Job{Kind: "backup", Policy: "bench", Status: catalog.StatusRunning}
		if err := c.CreateJob(ctx, j); err != nil {
			b.Fatal(err)
		}
		ids := make([]int64, 0, benchTasks)
		start := time.Now()
		for i := 0; i < benchTasks; i += benchTaskBatch {
			batch := make([]*catalog.Task, benchTaskBatch)
			for k := range batch {
				batch[k] = &catalog.Task{JobID: j.ID, Connection: "vc", VMID: fmt.Sprintf("vm-%d", i+k),
					VMName: fmt.Sprintf("guest-%d", i+k), Host: "esx-1", Datastores: []string{"ds-7"},
					Status: catalog.StatusQueued, Mode: "incremental", StartedAt: time.Now()}
			}
			if err := c.CreateTasks(ctx, batch); err != nil {
				b.Fatal(err)
			}
			for _, t := range batch {
				ids = append(ids, t.ID)
			}
		}
		taskTime += time.Since(start)
		start = time.Now()
		for i := 0; i < benchEvents; i += benchEventBatch {
			batch := make([]catalog.Event, benchEventBatch)
			for k := range batch {
				n := i + k
				batch[k] = catalog.Event{JobID: j.ID, TaskID: ids[n%len(ids)], Level: "info", Kind: "disk-progress",
					Message: "disk sda 42%", Fields: map[string]any{"bytes": n * 4096, "mbps": 312.5}}
			}
			if err := c.AddEvents(ctx, batch); err != nil {
				b.Fatal(err)
			}
		}
		eventTime += time.Since(start)
	}
	b.ReportMetric(float64(rounds*benchTasks)/taskTime.Seconds(), "tasks/s")
	b.ReportMetric(float64(rounds*benchEvents)/eventTime.Seconds(), "events/s")
}
