package job_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
)

// newEngine runs policies on a fake connection "lab" into a real local
// repository, recording every job as a task of m.
func newEngine(t *testing.T, m *job.Manager, cat catalog.Catalog, vms int, runner engine.Runner) *engine.Engine {
	t.Helper()
	r := repotest.New(t, repo.InitOptions{ChunkSize: 64 << 10})
	lab := fake.New(fake.Options{Seed: 7, VMs: vms, DiskSize: 256 << 10})
	eng, err := engine.New(context.Background(), engine.Options{
		Config: &policy.Config{Connections: []policy.Connection{{Name: "lab", Kind: "fake"}}}, Catalog: cat,
		Connectors:     map[string]hypervisor.Connector{"lab": lab},
		OpenRepository: func(context.Context, string) (*repo.Repository, error) { return r, nil },
		Runner:         runner, FlushInterval: 5 * time.Millisecond, Workers: 2,
		StartJob: engine.Starter(m.StartJob)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = eng.Close() })
	return eng
}

// A policy run is a task: who started it, what it acts on, its VM counts
// and final progress, and a log holding every event the engine records,
// numbered; its VM tasks and backup points are recorded as before.
func TestPolicyRunIsATask(t *testing.T) {
	cat, _ := newCatalog(t)
	m := newManager(t, cat, job.Options{})
	eng := newEngine(t, m, cat, 3, nil)
	ctx := job.WithUser(context.Background(), job.User{Name: "alice@pam"})
	res, err := eng.Run(ctx, policy.Policy{Name: "nightly", Connection: "lab"})
	ok(t, err)
	got := must[job.Record](t)(m.Get(ctx, res.Job.ID))
	if got.Kind != job.KindBackupPolicy || got.Object != "/policies/nightly" || got.Policy != "nightly" || got.User != "alice@pam" ||
		got.Owner != m.Owner() || got.Status != catalog.StatusSuccess || got.TasksTotal != 3 || got.TasksOK != 3 ||
		got.Progress.ItemsDone != 3 || got.Progress.ItemsTotal != 3 || got.Progress.BytesDone != got.Progress.BytesTotal {
		t.Fatalf("policy run as a task: %+v", got)
	}
	same(t, "result", res.Job, got)

	vmTasks := must[[]catalog.Task](t)(cat.ListTasks(ctx, catalog.TaskFilter{JobID: got.ID}))
	points := must[[]catalog.BackupPoint](t)(cat.ListBackupPoints(ctx, catalog.BackupPointFilter{}))
	if len(vmTasks) != 3 || len(points) != 3 {
		t.Fatalf("%d VM tasks and %d points recorded, want 3 of each", len(vmTasks), len(points))
	}
	for _, vt := range vmTasks {
		if vt.Status != catalog.StatusSuccess || vt.BackupPointID == "" || !slices.ContainsFunc(points, func(p catalog.BackupPoint) bool {
			return p.ID == vt.BackupPointID && p.JobID == got.ID
		}) {
			t.Fatalf("VM task %+v has no point of job %d", vt, got.ID)
		}
	}
	lines := must[[]job.Line](t)(m.Log(ctx, got.ID, 0, 0))
	same(t, "log lines", int64(len(lines)), got.LogLines)
	kinds := map[string]int{}
	for i, l := range lines {
		if l.Seq != int64(i+1) {
			t.Fatalf("line %d numbered %d", i+1, l.Seq)
		}
		kinds[l.Kind]++
		if l.Kind == "task-done" && !slices.ContainsFunc(vmTasks, func(vt catalog.Task) bool { return vt.ID == l.TaskID }) {
			t.Fatalf("task-done line of VM task %d, not one of the run's", l.TaskID)
		}
	}
	if kinds["job-start"] != 1 || kinds["inventory"] != 1 || kinds["task-done"] != 3 || kinds["job-end"] != 1 ||
		lines[0].Kind != "job-start" || lines[len(lines)-1].Kind != "job-end" {
		t.Fatalf("log kinds %v", kinds)
	}
}

// Cancelling the task of a policy run stops the run like Job.Cancel:
// running VMs stop, queued ones never start, the run ends cancelled.
func TestCancelAPolicyRun(t *testing.T) {
	cat, _ := newCatalog(t)
	m := newManager(t, cat, job.Options{})
	started := make(chan string, 8)
	blocking := func(ctx context.Context, _ *repo.Writer, _ hypervisor.Connector, req backup.VMRequest, _ backup.Options) (*repo.Point, error) {
		started <- req.VM.Name
		<-ctx.Done()
		return nil, ctx.Err()
	}
	eng := newEngine(t, m, cat, 2, blocking)
	ctx := context.Background()
	run, err := eng.Start(ctx, policy.Policy{Name: "slow", Connection: "lab"})
	ok(t, err)
	<-started
	<-started
	must[job.Record](t)(m.Cancel(ctx, run.ID(), "bob"))
	res, err := run.Wait()
	ok(t, err)
	got := must[job.Record](t)(m.Get(ctx, run.ID()))
	if res.Job.Status != catalog.StatusCancelled || got.Status != catalog.StatusCancelled || got.TasksOK != 0 {
		t.Fatalf("cancelled run: result %s, task %+v", res.Job.Status, got)
	}
	for _, vt := range res.Tasks {
		if vt.Status != catalog.StatusCancelled {
			t.Fatalf("VM task after the cancel: %+v", vt)
		}
	}
	lines := must[[]job.Line](t)(m.Log(ctx, got.ID, 0, 0))
	if !slices.ContainsFunc(lines, func(l job.Line) bool { return l.Message == "cancel requested by bob" }) {
		t.Fatalf("no cancel line in %v", messages(lines))
	}
}
