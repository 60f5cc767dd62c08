package server

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
)

// TestJobsArePaged: the jobs listing answers a page at a time (100 jobs
// unless the request says, at most 1000), newest first, and Coffer-Next
// continues it after the page's last job: following it yields every job
// once, in order, even while new jobs are recorded between pages. A
// caller who sees only some jobs gets shorter pages but the same cursor,
// so following it still yields all of its own. A cursor naming a job
// that is gone is a 404 problem.
func TestJobsArePaged(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	base := time.Now().Add(-time.Hour)
	for i := range 250 {
		// Pairs share a creation time: ties are broken by ID.
		j := &catalog.Job{Kind: catalog.KindVerify, Status: catalog.StatusSuccess, CreatedAt: base.Add(time.Duration(i/2) * time.Second),
			User: "alice"}
		if i%5 == 0 {
			j.User = tenant
		}
		if err := e.cat.CreateJob(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	all, err := e.cat.ListJobs(ctx, catalog.JobFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var want, tenants []int64
	for _, j := range all {
		want = append(want, j.ID)
		if j.User == tenant {
			tenants = append(tenants, j.ID)
		}
	}

	// follow lists every page of a query, recording a new job between
	// pages, and returns the IDs listed and the pages' sizes.
	follow := func(token, query string) (ids []int64, sizes []int) {
		t.Helper()
		path := "/jobs?" + query
		for {
			r := e.do(token, http.MethodGet, path, nil)
			if r.status != http.StatusOK {
				t.Fatalf("GET %s: %d %s", path, r.status, r.body)
			}
			var page []api.Job
			r.json(t, &page)
			sizes = append(sizes, len(page))
			for _, j := range page {
				ids = append(ids, j.ID)
			}
			next := r.header.Get(api.NextHeader)
			if next == "" {
				return ids, sizes
			}
			if err := e.cat.CreateJob(ctx, &catalog.Job{Kind: catalog.KindGC, Status: catalog.StatusRunning, User: tenant}); err != nil {
				t.Fatal(err)
			}
			path = "/jobs?" + query + "&after=" + next
		}
	}
	admin := e.tokens["admin"]
	ids, sizes := follow(admin, "")
	if !slices.Equal(ids, want) {
		t.Fatalf("following the pages listed %d jobs %v,\nwant %d %v", len(ids), ids, len(want), want)
	}
	if sizes[0] != 100 || len(sizes) != (len(want)+99)/100 {
		t.Errorf("pages of %v jobs, want 100 per page by default", sizes)
	}
	ids, sizes = follow(admin, "limit=7&kind=verify")
	if len(ids) != 250 || sizes[0] != 7 {
		t.Errorf("pages of 7 verify jobs: %d jobs in pages of %v", len(ids), sizes)
	}

	// The tenant sees its own jobs only: short pages, none missed.
	ids, sizes = follow(e.tokens[tenant], "limit=10&kind=verify")
	if !slices.Equal(ids, tenants) {
		t.Fatalf("the tenant listed %v, want its jobs %v", ids, tenants)
	}
	if sizes[0] >= 10 {
		t.Errorf("the tenant's first page held %d jobs: others' were not left out", sizes[0])
	}

	e.do(admin, http.MethodGet, "/jobs?limit=1001", nil).problem(t, http.StatusUnprocessableEntity, api.Invalid)
	gone := strconv.FormatInt(all[0].ID+100_000, 10)
	if d := e.do(admin, http.MethodGet, "/jobs?after="+gone, nil).problem(t, http.StatusNotFound, api.NotFound); d == "" {
		t.Error("no message for a cursor to a job that is gone")
	}
}

// TestJobDetailIsPaged: a job's document holds a page of its per-VM
// tasks (100 unless the request says, at most 1000) and the first lines
// of its log; Coffer-Next continues the tasks, job-log the log, and
// tasks_total and log_lines say how many there are.
func TestJobDetailIsPaged(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	j := &catalog.Job{Kind: catalog.KindBackupPolicy, Policy: "nightly", Status: catalog.StatusSuccess, TasksTotal: 250}
	if err := e.cat.CreateJob(ctx, j); err != nil {
		t.Fatal(err)
	}
	var tasks []*catalog.Task
	var lines []catalog.Event
	for i := range 250 {
		tasks = append(tasks, &catalog.Task{JobID: j.ID, Connection: "lab", VMID: strconv.Itoa(i), VMName: "vm-" + strconv.Itoa(i),
			Status: catalog.StatusSuccess})
		lines = append(lines, catalog.Event{JobID: j.ID, Level: "info", Kind: "vm-done", Message: "line " + strconv.Itoa(i+1)})
	}
	if err := e.cat.CreateTasks(ctx, tasks); err != nil {
		t.Fatal(err)
	}
	if err := e.cat.AddEvents(ctx, lines); err != nil {
		t.Fatal(err)
	}
	admin := e.tokens["admin"]
	path := "/jobs/" + strconv.FormatInt(j.ID, 10)
	get := func(query string) (api.Job, string) {
		t.Helper()
		r := e.do(admin, http.MethodGet, path+query, nil)
		if r.status != http.StatusOK {
			t.Fatalf("GET %s%s: %d %s", path, query, r.status, r.body)
		}
		var doc api.Job
		r.json(t, &doc)
		return doc, r.header.Get(api.NextHeader)
	}
	doc, next := get("")
	if len(doc.Tasks) != 100 || len(doc.Events) != 100 || doc.TasksTotal != 250 || doc.LogLines != 250 || next == "" {
		t.Fatalf("first answer: %d tasks of %d, %d lines of %d, next %q", len(doc.Tasks), doc.TasksTotal, len(doc.Events),
			doc.LogLines, next)
	}
	var got []int64
	for {
		for _, task := range doc.Tasks {
			got = append(got, task.ID)
		}
		if next == "" {
			break
		}
		doc, next = get("?tasks=30&tasks_after=" + next)
	}
	var want []int64
	for _, task := range tasks {
		want = append(want, task.ID)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("following the tasks gave %v,\nwant %v", got, want)
	}
	doc, _ = get("?log=1000")
	if len(doc.Events) != 250 || doc.Events[249].Message != "line 250" {
		t.Errorf("log=1000 gave %d lines", len(doc.Events))
	}
	e.do(admin, http.MethodGet, path+"?tasks=1001", nil).problem(t, http.StatusUnprocessableEntity, api.Invalid)
}

// TestCatalogPointsArePaged: the catalog's points are listed a page at a
// time (100 unless limit says, at most 1000), newest first; following
// Coffer-Next yields every point once, in order, points of the same time
// and ID in two repositories included. A cursor that is not one is a 400.
func TestCatalogPointsArePaged(t *testing.T) {
	e := newEnv(t, "")
	ctx := context.Background()
	base := time.Now().Add(-time.Hour).UTC().Truncate(time.Microsecond)
	var points []catalog.BackupPoint
	for i := range 230 {
		points = append(points, catalog.BackupPoint{Repository: "r1", ID: strconv.Itoa(1000 + i/3), Time: base.Add(time.Duration(i/6) * time.Second),
			Connection: "lab", VMID: "vm-1", VMName: "web-0001"})
		if i%3 == 0 { // the same point copied to a second repository
			p := points[len(points)-1]
			p.Repository = "r2"
			points = append(points, p)
		}
	}
	for i := range points { // IDs repeat within r1: make them unique there
		points[i].ID += "-" + strconv.Itoa(i%3)
		if points[i].Repository == "r2" {
			points[i].ID = points[i-1].ID
		}
	}
	if err := e.cat.PutBackupPoints(ctx, points); err != nil {
		t.Fatal(err)
	}
	all, err := e.cat.ListBackupPoints(ctx, catalog.BackupPointFilter{})
	if err != nil {
		t.Fatal(err)
	}
	key := func(repo, id string) string { return repo + "/" + id }
	var want []string
	for _, p := range all {
		want = append(want, key(p.Repository, p.ID))
	}
	admin := e.tokens["admin"]
	var got []string
	var sizes []int
	path := "/points?limit=40"
	for {
		r := e.do(admin, http.MethodGet, path, nil)
		if r.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
		var page []api.BackupPoint
		r.json(t, &page)
		sizes = append(sizes, len(page))
		for _, p := range page {
			got = append(got, key(p.Repository, p.ID))
		}
		next := r.header.Get(api.NextHeader)
		if next == "" {
			break
		}
		path = "/points?limit=40&after=" + next
	}
	if !slices.Equal(got, want) {
		t.Fatalf("following the pages listed %d points,\nwant %d in the catalog's order", len(got), len(want))
	}
	if sizes[0] != 40 {
		t.Errorf("pages of %v points", sizes)
	}
	var first []api.BackupPoint
	e.do(admin, http.MethodGet, "/points", nil).json(t, &first)
	if len(first) != 100 {
		t.Errorf("the first page without a limit held %d points, want 100", len(first))
	}
	e.do(admin, http.MethodGet, "/points?limit=1001", nil).problem(t, http.StatusUnprocessableEntity, api.Invalid)
	e.do(admin, http.MethodGet, "/points?after=yesterday", nil).problem(t, http.StatusBadRequest, api.Invalid)
}
