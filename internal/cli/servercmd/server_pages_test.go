package servercmd_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
)

// TestRemoteListingsPageThroughTheServer: the server answers listings a
// page at a time (at most 1000 items); the remote command line follows
// the pages, so that `jobs --limit 0`, `catalog points` and `job show` of
// a run over more VMs than a page print everything, as they do locally.
func TestRemoteListingsPageThroughTheServer(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	ctx := context.Background()
	cat, err := catalogopen.Open(ctx, e.Vars["COFFER_CATALOG"])
	if err != nil {
		t.Fatal(err)
	}
	const vms, singles = 1100, 150
	base := time.Now().Add(-time.Hour)
	run := &catalog.Job{Kind: catalog.KindBackupPolicy, Policy: "nightly", Status: catalog.StatusSuccess, CreatedAt: base,
		TasksTotal: vms, TasksOK: vms}
	if err := cat.CreateJob(ctx, run); err != nil {
		t.Fatal(err)
	}
	var tasks []*catalog.Task
	var lines []catalog.Event
	var points []catalog.BackupPoint
	for i := range vms {
		vm := "vm-" + strconv.Itoa(i)
		tasks = append(tasks, &catalog.Task{JobID: run.ID, Connection: "lab", VMID: vm, VMName: vm, Status: catalog.StatusSuccess})
		lines = append(lines, catalog.Event{JobID: run.ID, Level: "info", Kind: "vm-done", Message: vm + " backed up"})
		points = append(points, catalog.BackupPoint{Repository: "r1", ID: "p" + strconv.Itoa(i), Time: base.Add(time.Duration(i) * time.Second),
			Connection: "lab", VMID: vm, VMName: vm, Mode: "full"})
	}
	if err := cat.CreateTasks(ctx, tasks); err != nil {
		t.Fatal(err)
	}
	if err := cat.AddEvents(ctx, lines); err != nil {
		t.Fatal(err)
	}
	if err := cat.PutBackupPoints(ctx, points); err != nil {
		t.Fatal(err)
	}
	// More jobs than a page: the run's log and tasks fill one already.
	for i := range 1000 + singles {
		j := &catalog.Job{Kind: catalog.KindVerify, Status: catalog.StatusSuccess, CreatedAt: base.Add(time.Duration(i+1) * time.Millisecond)}
		if err := cat.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	all, err := cat.ListJobs(ctx, catalog.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	cat.Close()

	s := e.StartServer()
	tok := e.AdminToken()
	remoteJSON := func(v any, args ...string) {
		t.Helper()
		code, out, errOut := e.Remote(s, tok, append(args, "--json")...)
		if code != 0 {
			t.Fatalf("remote coffer %v: exit %d\n%s", args, code, errOut)
		}
		if err := json.Unmarshal([]byte(out), v); err != nil {
			t.Fatalf("remote coffer %v: %v", args, err)
		}
	}
	var jobs []api.Job
	remoteJSON(&jobs, "jobs", "--limit", "0")
	if len(jobs) != len(all) || jobs[0].ID != all[0].ID || jobs[len(jobs)-1].ID != run.ID {
		t.Errorf("jobs --limit 0 listed %d jobs, want the catalog's %d, newest first", len(jobs), len(all))
	}
	remoteJSON(&jobs, "jobs", "--limit", "1050")
	if len(jobs) != 1050 {
		t.Errorf("jobs --limit 1050 listed %d jobs", len(jobs))
	}
	var listed []api.BackupPoint
	remoteJSON(&listed, "catalog", "points")
	if len(listed) != vms || listed[0].ShortID == listed[1].ShortID {
		t.Errorf("catalog points listed %d points, want %d", len(listed), vms)
	}
	var job api.Job
	remoteJSON(&job, "job", "show", strconv.FormatInt(run.ID, 10))
	if len(job.Tasks) != vms || len(job.Events) != vms || job.Events[vms-1].Seq != vms || job.Tasks[vms-1].VM != "vm-1099" {
		t.Errorf("job show: %d tasks and %d lines, want %d of each in order", len(job.Tasks), len(job.Events), vms)
	}
}
