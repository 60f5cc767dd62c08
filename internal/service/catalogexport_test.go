package service_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/maintenance"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/fleetops"
	"github.com/coffer-backup/coffer/internal/service/operations"
	"github.com/coffer-backup/coffer/internal/service/repoops"
)

// TestScheduledCatalogExport: a maintenance catalog-export job exports
// the server's state into the job's repository, marked as scheduled, and
// keeps the newest exports it is told to.
func TestScheduledCatalogExport(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "pw")
	if err := os.WriteFile(pwFile, []byte("pw"), 0o600); err != nil {
		t.Fatal(err)
	}
	pw := func() ([]byte, error) { return []byte("pw"), nil }
	eng := &policy.Config{Repositories: []policy.Repository{{Name: "a", Location: filepath.Join(dir, "a"), PasswordFile: pwFile}}}
	s := operations.New(service.Config{Repository: service.Location{Location: filepath.Join(dir, "a"), Password: pw},
		Catalog: filepath.Join(dir, "catalog.db"), StateDir: filepath.Join(dir, "state"), Engine: eng, Local: true})
	defer s.Close()
	if _, err := (repoops.Ops{Service: s}).InitWith(ctx, &api.InitRepositoryInput{}, repoops.InitOptions{Password: []byte("pw")}); err != nil {
		t.Fatal(err)
	}
	mcfg := &maintenance.Config{Repositories: []maintenance.Repository{{Repository: "a",
		CatalogExport: &maintenance.CatalogExportJob{Common: maintenance.Common{Schedule: "30 0 * * *"}, Keep: 2}}}}
	jobs, err := mcfg.Jobs(eng)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("jobs %+v: %v", jobs, err)
	}
	for range 3 {
		if err := (fleetops.Ops{Service: s}).RunMaintenance(ctx, jobs[0], maintenance.Run{Slot: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := repoops.Ops{Service: s}.CatalogExports(ctx, &api.RepoParam{Repo: "a"})
	if err != nil || len(list) != 2 || list[0].Reason != "schedule" || list[0].Rows == 0 {
		t.Fatalf("exports after three scheduled runs keeping 2: %+v (%v)", list, err)
	}
}
