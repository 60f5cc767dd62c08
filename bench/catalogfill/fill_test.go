package catalogfill

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// small is the issue's shape divided by 500 (20 VMs, 2000 jobs, 200
// audit records), with three policy runs, two of which took points.
func small() Shape {
	s := IssueShape(time.Date(2026, 11, 1, 3, 0, 0, 123456000, time.UTC)).Scaled(500)
	s.PolicyRuns, s.PointsPerVM = 3, 2
	return s
}

// TestFillReadsBack fills a small catalog on each driver and reads every
// kind of row back through the catalog's API: what the bulk writes stored
// is what the model says, as the catalog would have stored it, and the
// catalog goes on from there (new jobs get new IDs, new lines the next
// number of their log).
func TestFillReadsBack(t *testing.T) {
	for _, db := range []struct {
		name string
		loc  func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return filepath.Join(t.TempDir(), "catalog.db") }},
		{"postgres", func(t *testing.T) string { return testutil.StartPostgres(t) }},
	} {
		t.Run(db.name, func(t *testing.T) { testFill(t, db.loc(t)) })
	}
}

func testFill(t *testing.T, loc string) {
	ctx := context.Background()
	s := small()
	cat, err := catalogopen.Open(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	var steps []string
	if err := Fill(ctx, cat, s, func(what string, _ int, _ time.Duration) { steps = append(steps, what) }); err != nil {
		t.Fatal(err)
	}
	if len(steps) != 7 {
		t.Errorf("progress told %v", steps)
	}

	// Every job, as the model has it; the listing holds them all, newest first.
	jobs, err := cat.ListJobs(ctx, catalog.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(jobs) != s.Jobs {
		t.Fatalf("%d jobs listed, want %d", len(jobs), s.Jobs)
	}
	runs := 0
	for i, j := range jobs {
		id := int64(s.Jobs - i)
		same(t, "job", j, s.Job(id))
		if s.IsPolicyRun(id) {
			runs++
		}
	}
	if runs != s.PolicyRuns {
		t.Errorf("%d policy runs, want %d", runs, s.PolicyRuns)
	}

	// Logs: a policy run's and a single-VM job's, whole.
	for _, id := range []int64{s.PolicyRun(0), s.PolicyRun(s.PolicyRuns - 1), 1, int64(s.Jobs)} {
		log, err := cat.JobLog(ctx, id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		j := s.Job(id)
		if int64(len(log)) != j.LogLines {
			t.Fatalf("job %d: %d lines, want %d", id, len(log), j.LogLines)
		}
		for i, e := range log {
			want := s.Log(id, int64(i+1))
			e.ID = 0
			same(t, "log line", e, want)
		}
	}

	// The tasks of every run, the inventory, the points, the audit log.
	for k := range s.PolicyRuns {
		tasks, err := cat.ListTasks(ctx, catalog.TaskFilter{JobID: s.PolicyRun(k)})
		if err != nil {
			t.Fatal(err)
		}
		if len(tasks) != s.VMs {
			t.Fatalf("run %d: %d tasks, want %d", k, len(tasks), s.VMs)
		}
		for vm, task := range tasks {
			same(t, "task", task, s.Task(k, vm))
		}
	}
	vms, err := cat.ListVMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(vms) != s.VMs {
		t.Fatalf("%d VMs, want %d", len(vms), s.VMs)
	}
	byName := map[string]catalog.VMRecord{}
	for _, v := range vms {
		byName[v.Name] = v
	}
	for i := range s.VMs {
		same(t, "VM", byName[VMName(i)], s.VM(i))
	}
	states, err := cat.InventoryStates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != s.Connections {
		t.Fatalf("%d connections' inventories, want %d", len(states), s.Connections)
	}
	for _, st := range states {
		if !st.RefreshedAt.Equal(s.End) || st.Error != "" {
			t.Fatalf("inventory state %+v, want refreshed at %s", st, s.End)
		}
	}
	points, err := cat.ListBackupPoints(ctx, catalog.BackupPointFilter{VMID: VMID(3)})
	if err != nil {
		t.Fatal(err)
	}
	want := []catalog.BackupPoint{s.Point(3, 1), s.Point(3, 0)} // newest first
	same(t, "points of a VM", points, want)
	all, err := cat.ListBackupPoints(ctx, catalog.BackupPointFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != s.Points() {
		t.Errorf("%d points, want %d", len(all), s.Points())
	}
	audit, err := cat.ListAudit(ctx, catalog.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) != s.Audit {
		t.Fatalf("%d audit records, want %d", len(audit), s.Audit)
	}
	for i, r := range audit {
		same(t, "audit record", r, s.AuditRecord(s.Audit-1-i))
	}

	// The catalog goes on: a new job after the last, its log from 1, and
	// a line appended to a filled job's log gets the next number.
	j := &catalog.Job{Kind: catalog.KindVerify, Status: catalog.StatusRunning}
	if err := cat.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	if j.ID != int64(s.Jobs)+1 {
		t.Errorf("a new job got ID %d, want %d", j.ID, s.Jobs+1)
	}
	more := []catalog.Event{{JobID: j.ID, Level: "info", Kind: "x"}, {JobID: 1, Level: "info", Kind: "y"}}
	if err := cat.AddEvents(ctx, more); err != nil {
		t.Fatal(err)
	}
	if more[0].Seq != 1 || more[1].Seq != int64(s.LogLines)+1 {
		t.Errorf("new lines numbered %d and %d, want 1 and %d", more[0].Seq, more[1].Seq, s.LogLines+1)
	}

	// A filled catalog is refused: the IDs would not be the model's.
	if err := Fill(ctx, cat, s, nil); err == nil {
		t.Error("a second fill of the same catalog was not refused")
	}
}

func same[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}
