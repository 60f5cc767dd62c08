package service_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/catalog/catalogopen"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/operations"
	"github.com/coffer-backup/coffer/internal/service/servicetest"
)

// TestOpenCatalogIsUsedAndKeptOpen: a service given the catalog it runs
// on (the server's) reads and writes through it instead of opening the
// location, and no operation closes it.
func TestOpenCatalogIsUsedAndKeptOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	cat, err := catalogopen.Open(ctx, filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if err := cat.CreateJob(ctx, &catalog.Job{Kind: catalog.KindVerify, Status: catalog.StatusSuccess}); err != nil {
		t.Fatal(err)
	}
	if err := cat.PutBackupPoints(ctx, []catalog.BackupPoint{{Repository: "r1", ID: "p1", VMName: "web-1", Time: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	// The location is a directory: opening it would fail.
	s := operations.New(service.Config{Catalog: dir, OpenCatalog: cat, StateDir: filepath.Join(dir, "state"), Local: true})
	for range 2 { // a second round finds the catalog still open
		jobs, err := servicetest.ListJobs(ctx, s, &api.ListJobsInput{})
		if err != nil {
			t.Fatal(err)
		}
		if len(jobs) != 1 || jobs[0].Kind != catalog.KindVerify {
			t.Fatalf("jobs: %+v", jobs)
		}
		if _, err := servicetest.WholeJob(ctx, s, jobs[0].ID); err != nil {
			t.Fatal(err)
		}
		points, err := catalogPoints(ctx, s, api.ListCatalogPointsInput{VM: "web-1"})
		if err != nil {
			t.Fatal(err)
		}
		if len(points) != 1 {
			t.Fatalf("points: %+v", points)
		}
		if err := s.Ready(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cat.ListJobs(ctx, catalog.JobFilter{}); err != nil {
		t.Fatalf("the service closed the catalog it was given: %v", err)
	}

	// Without it, the same service opens the location, and fails here.
	s = operations.New(service.Config{Catalog: dir, StateDir: filepath.Join(dir, "state"), Local: true})
	if _, err := servicetest.ListJobs(ctx, s, &api.ListJobsInput{}); err == nil {
		t.Fatal("a directory opened as the catalog")
	}
}
