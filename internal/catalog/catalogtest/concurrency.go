package catalogtest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/coffer-backup/coffer/internal/catalog"
)

func testReopen(t *testing.T, open Opener) {
	ctx := context.Background()
	c, err := open(ctx)
	ok(t, err)
	j := &catalog.Job{Kind: "backup", Policy: "p", CreatedAt: at(0)}
	ok(t, c.CreateJob(ctx, j))
	task := &catalog.Task{JobID: j.ID, VMID: "vm", Warnings: []string{"w"}}
	ok(t, c.CreateTasks(ctx, []*catalog.Task{task}))
	ok(t, c.AddEvents(ctx, []catalog.Event{{Time: at(0), JobID: j.ID, Kind: "k", Fields: map[string]any{"n": 1.5}}}))
	ok(t, c.PutBackupPoints(ctx, []catalog.BackupPoint{point("r", "p", 0, "vm")}))
	ok(t, c.PutVMs(ctx, []catalog.VMRecord{{Connection: "c", ID: "vm", Name: "n"}}))
	ok(t, c.Close())

	c = mustOpen(t, open)
	got, err := c.GetJob(ctx, j.ID)
	ok(t, err)
	want := *j
	want.LogLines = 1
	same(t, "job after reopen", got, want)
	gotTask, err := c.GetTask(ctx, task.ID)
	ok(t, err)
	same(t, "task after reopen", gotTask, *task)
	events, err := c.ListEvents(ctx, catalog.EventFilter{})
	ok(t, err)
	same(t, "events after reopen", len(events), 1)
	same(t, "points after reopen", pointIDs(listPoints(t, c, catalog.BackupPointFilter{})), []string{"p"})
	vms, err := c.ListVMs(ctx)
	ok(t, err)
	same(t, "VMs after reopen", len(vms), 1)
	// IDs keep growing after a reopen.
	j2 := &catalog.Job{Kind: "backup"}
	ok(t, c.CreateJob(ctx, j2))
	if j2.ID <= j.ID {
		t.Fatalf("job ID %d after reopen, before %d", j2.ID, j.ID)
	}
}

func testMigrationIdempotent(t *testing.T, open Opener) {
	ctx := context.Background()
	// Several processes opening a new database at the same time, then
	// again one after another: each open migrates or sees it done.
	handles := make([]catalog.Catalog, 4)
	var g errgroup.Group
	for i := range handles {
		g.Go(func() error {
			c, err := open(ctx)
			handles[i] = c
			return err
		})
	}
	err := g.Wait()
	for _, c := range handles {
		if c != nil {
			t.Cleanup(func() { _ = c.Close() })
		}
	}
	ok(t, err)
	j := &catalog.Job{Kind: "backup"}
	ok(t, handles[0].CreateJob(ctx, j))
	for range 2 {
		c, err := open(ctx)
		ok(t, err)
		if _, err := c.GetJob(ctx, j.ID); err != nil {
			t.Fatalf("job lost after opening again: %v", err)
		}
		ok(t, c.Close())
	}
}

// testConcurrentWriters runs several handles (processes, in effect), each
// with several goroutines, through the engine's write pattern: create a
// job, its tasks, update them one batch at a time, log events, record
// points and finish the job.
func testConcurrentWriters(t *testing.T, open Opener) {
	const handles, goroutines, jobsEach, tasksPerJob = 3, 3, 4, 5
	ctx := context.Background()
	cats := make([]catalog.Catalog, handles)
	for i := range cats {
		cats[i] = mustOpen(t, open)
	}
	var (
		mu     sync.Mutex
		jobIDs = map[int64]bool{}
	)
	g, gctx := errgroup.WithContext(ctx)
	for h := range handles {
		for w := range goroutines {
			g.Go(func() error {
				for k := range jobsEach {
					id, err := SimulateJob(gctx, cats[h], fmt.Sprintf("w%d-%d-%d", h, w, k), tasksPerJob)
					if err != nil {
						return err
					}
					mu.Lock()
					dup := jobIDs[id]
					jobIDs[id] = true
					mu.Unlock()
					if dup {
						return fmt.Errorf("job ID %d handed out twice", id)
					}
				}
				return nil
			})
		}
	}
	ok(t, g.Wait())
	c := cats[0]
	total := handles * goroutines * jobsEach
	jobs, err := c.ListJobs(ctx, catalog.JobFilter{Status: catalog.StatusSuccess})
	ok(t, err)
	same(t, "finished jobs", len(jobs), total)
	tasks, err := c.ListTasks(ctx, catalog.TaskFilter{})
	ok(t, err)
	same(t, "tasks", len(tasks), total*tasksPerJob)
	taskIDs := map[int64]bool{}
	for _, x := range tasks {
		if x.Status != catalog.StatusSuccess || x.Attempts != 1 || taskIDs[x.ID] {
			t.Fatalf("task %+v (duplicate %v)", x, taskIDs[x.ID])
		}
		taskIDs[x.ID] = true
	}
	events, err := c.ListEvents(ctx, catalog.EventFilter{})
	ok(t, err)
	same(t, "events", len(events), total*(tasksPerJob+1))
	same(t, "points", len(listPoints(t, c, catalog.BackupPointFilter{Repository: "shared"})), total*tasksPerJob)
}

// SimulateJob writes what the engine writes for one backup job of n VMs:
// the job, its tasks in one batch, one update and event per task, the
// backup points, the finished job and a closing event. It returns the
// job's ID. Tests of several processes sharing a catalog run it in each.
func SimulateJob(ctx context.Context, c catalog.Catalog, name string, n int) (int64, error) {
	j := &catalog.Job{Kind: "backup", Policy: name, Status: catalog.StatusRunning, StartedAt: time.Now()}
	if err := c.CreateJob(ctx, j); err != nil {
		return 0, err
	}
	tasks := make([]*catalog.Task, n)
	for i := range tasks {
		tasks[i] = &catalog.Task{JobID: j.ID, VMID: fmt.Sprintf("%s-vm%d", name, i), Status: catalog.StatusQueued}
	}
	if err := c.CreateTasks(ctx, tasks); err != nil {
		return 0, err
	}
	var points []catalog.BackupPoint
	for i, x := range tasks {
		x.Status, x.Attempts = catalog.StatusSuccess, 1
		x.BackupPointID = fmt.Sprintf("%s-p%d", name, i)
		if err := c.UpdateTasks(ctx, []*catalog.Task{x}); err != nil {
			return 0, err
		}
		if err := c.AddEvents(ctx, []catalog.Event{{JobID: j.ID, TaskID: x.ID, Kind: "task-done",
			Fields: map[string]any{"i": i}}}); err != nil {
			return 0, err
		}
		points = append(points, catalog.BackupPoint{Repository: "shared", ID: x.BackupPointID, Time: time.Now(), VMID: x.VMID})
	}
	if err := c.PutBackupPoints(ctx, points); err != nil {
		return 0, err
	}
	j.Status, j.TasksTotal, j.TasksOK, j.FinishedAt = catalog.StatusSuccess, n, n, time.Now()
	if err := c.UpdateJob(ctx, j); err != nil {
		return 0, err
	}
	return j.ID, c.AddEvents(ctx, []catalog.Event{{JobID: j.ID, Kind: "job-done"}})
}

// testReplaceAtomicForReaders has two writers (separate handles) replace a
// repository's points with their own set, over and over, while a reader
// lists them: every read, and the end state, must be exactly one set.
func testReplaceAtomicForReaders(t *testing.T, open Opener) {
	ctx := context.Background()
	writers, r := []catalog.Catalog{mustOpen(t, open), mustOpen(t, open)}, mustOpen(t, open)
	sizes := map[byte]int{'a': 60, 'b': 90}
	sets := map[byte][]catalog.BackupPoint{}
	for prefix, n := range sizes {
		for i := range n {
			sets[prefix] = append(sets[prefix], point("r", fmt.Sprintf("%c%03d", prefix, i), time.Duration(i)*time.Second, "vm"))
		}
	}
	check := func(ps []catalog.BackupPoint) error {
		seen := map[byte]int{}
		for _, p := range ps {
			seen[p.ID[0]]++
		}
		if len(seen) != 1 || (seen['a'] != sizes['a'] && seen['b'] != sizes['b']) {
			return fmt.Errorf("saw a mixed or partial set: %v", seen)
		}
		return nil
	}
	ok(t, writers[0].ReplaceBackupPoints(ctx, "r", sets['a']))
	var running atomic.Int32
	running.Store(2)
	g, gctx := errgroup.WithContext(ctx)
	for i, prefix := range []byte{'a', 'b'} {
		g.Go(func() error {
			defer running.Add(-1)
			for range 15 {
				if err := writers[i].ReplaceBackupPoints(gctx, "r", sets[prefix]); err != nil {
					return err
				}
			}
			return nil
		})
	}
	reads := 0
	g.Go(func() error {
		for running.Load() > 0 {
			ps, err := r.ListBackupPoints(gctx, catalog.BackupPointFilter{Repository: "r"})
			if err != nil {
				return err
			}
			reads++
			if err := check(ps); err != nil {
				return fmt.Errorf("a reader %w", err)
			}
		}
		return nil
	})
	ok(t, g.Wait())
	if err := check(listPoints(t, r, catalog.BackupPointFilter{Repository: "r"})); err != nil {
		t.Fatalf("after concurrent replaces the repository %v", err)
	}
	t.Logf("%d consistent reads during 30 concurrent replaces", reads)
}
