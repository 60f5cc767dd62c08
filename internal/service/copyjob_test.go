package service_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/maintenance"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/backupops"
	"github.com/coffer-backup/coffer/internal/service/fleetops"
	"github.com/coffer-backup/coffer/internal/service/operations"
	"github.com/coffer-backup/coffer/internal/service/repoops"
	"github.com/coffer-backup/coffer/internal/service/servicetest"
)

// TestScheduledCopyRunsTheCopyOperation: a maintenance copy job runs the
// copy operation by its ID on the job's repository, as a request to that
// repository would: the point lands in the target, opened with its own
// password file, and the copy is a task of the source repository.
// The server running the job has a default repository of its own.
func TestScheduledCopyRunsTheCopyOperation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("pw"), 0o600); err != nil {
		t.Fatal(err)
	}
	pw := func() ([]byte, error) { return []byte("pw"), nil }
	eng := &policy.Config{Repositories: []policy.Repository{
		{Name: "a", Location: filepath.Join(dir, "a"), PasswordFile: pwFile},
		{Name: "b", Location: filepath.Join(dir, "b"), PasswordFile: pwFile}}}
	at := func(name string) *service.Service {
		return operations.New(service.Config{Repository: service.Location{Location: filepath.Join(dir, name), Password: pw},
			Catalog: filepath.Join(dir, "catalog.db"), StateDir: filepath.Join(dir, "state"), Engine: eng, Local: true})
	}
	for _, name := range []string{"a", "b"} {
		s := at(name)
		if _, err := (repoops.Ops{Service: s}).InitWith(ctx, &api.InitRepositoryInput{}, repoops.InitOptions{Password: []byte("pw")}); err != nil {
			t.Fatal(err)
		}
		_ = s.Close()
	}
	s := at("a")
	defer s.Close()
	img := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(img, []byte("a disk's few bytes"), 0o600); err != nil {
		t.Fatal(err)
	}
	point, err := backupops.Ops{Service: s}.BackupDisk(ctx, &api.BackupDiskInput{Body: api.BackupDiskRequest{Paths: []string{img}, Name: "disk"}})
	if err != nil {
		t.Fatal(err)
	}
	mcfg := &maintenance.Config{Repositories: []maintenance.Repository{{Repository: "a",
		Copy: []maintenance.CopyJob{{Common: maintenance.Common{Schedule: "0 3 * * *"}, To: "b"}}}}}
	jobs, err := mcfg.Jobs(eng)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("jobs %+v: %v", jobs, err)
	}
	// The server's own repository is neither: the job names its source.
	server := at("elsewhere")
	defer server.Close()
	if err := (fleetops.Ops{Service: server}).RunMaintenance(ctx, jobs[0], maintenance.Run{Slot: time.Now()}); err != nil {
		t.Fatal(err)
	}
	b := at("b")
	defer b.Close()
	copied, _, err := repoops.Ops{Service: b}.RepositoryPoints(ctx, &api.ListPointsInput{})
	if err != nil || len(copied) != 1 || copied[0].ID != point.ID {
		t.Fatalf("b holds %+v (%v), want the point %s", copied, err, point.ID)
	}
	tasks, err := servicetest.ListJobs(ctx, s, &api.ListJobsInput{Kind: job.KindCopy})
	if err != nil || len(tasks) != 1 || tasks[0].Repository != "a" || tasks[0].Status != "success" {
		t.Fatalf("copy jobs %+v (%v), want one of repository a that succeeded", tasks, err)
	}
}
