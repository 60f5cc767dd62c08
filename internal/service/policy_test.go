package service_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/operations"
	"github.com/coffer-backup/coffer/internal/service/planops"
	"github.com/coffer-backup/coffer/internal/service/repoops"
	"github.com/coffer-backup/coffer/internal/service/servicetest"
)

// fleetService is a service over a local repository in dir whose
// configuration is doc, with the simulated fleet registered.
func fleetService(t *testing.T, dir, doc string) *service.Service {
	t.Helper()
	servicetest.RegisterFake()
	f, err := config.Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := policy.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	pw := func() ([]byte, error) { return []byte("pw"), nil }
	return operations.New(service.Config{Repository: service.Location{Location: filepath.Join(dir, "repo"), Password: pw},
		Catalog: filepath.Join(dir, "catalog.db"), StateDir: filepath.Join(dir, "state"), Engine: cfg})
}

const fleet = `
connections:
  - {name: lab, kind: fake, options: {seed: 9, vms: 6, hosts: 1, datastores: 1, disk-size: 256KiB}}
policies:
  - name: web
    connection: lab
    select: {names: ["web-*"]}
    schedule: "0 22 * * *"
`

// TestPolicyPreviewChangesNothing: the preview names the VMs a policy
// selects, its next runs, and what its keep rules would do to the points
// it made, without removing any.
func TestPolicyPreviewChangesNothing(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := fleetService(t, dir, fleet)
	if _, err := (repoops.Ops{Service: s}).InitWith(ctx, &api.InitRepositoryInput{}, repoops.InitOptions{Password: []byte("pw")}); err != nil {
		t.Fatal(err)
	}
	vms := 0
	for range 2 {
		run, err := s.RunPolicy(ctx, "web")
		if err != nil {
			t.Fatal(err)
		}
		j, err := run.Wait()
		if err != nil || j.TasksOK == 0 || j.TasksOK != j.TasksTotal {
			t.Fatalf("run: %+v %v", j, err)
		}
		vms = j.TasksOK
	}
	// The same policy with keep rules, previewed.
	s = fleetService(t, dir, fleet+"    retention: {keep-last: 1}\n")
	p, err := planops.Ops{Service: s}.PolicyPreview(ctx, &api.PreviewPolicyInput{PolicyParam: api.PolicyParam{Policy: "web"}, Runs: 3})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Selected) != 1 || p.Selected[0].VMsTotal != 6 || len(p.Selected[0].VMs) != vms {
		t.Fatalf("selection: %+v", p.Selected)
	}
	if len(p.NextRuns) != 3 || !p.NextRuns[0].After(time.Now()) {
		t.Fatalf("next runs: %v", p.NextRuns)
	}
	for i, r := range p.NextRuns {
		if r.Hour() != 22 || r.Minute() != 0 || i > 0 && r.YearDay() == p.NextRuns[i-1].YearDay() {
			t.Fatalf("next runs of 0 22 * * *: %v", p.NextRuns)
		}
	}
	if len(p.Sources) != vms {
		t.Fatalf("retention verdict for %d VMs, want %d: %+v", len(p.Sources), vms, p.Sources)
	}
	for _, src := range p.Sources {
		if len(src.Keep) != 1 || len(src.Remove) != 1 || !src.Keep[0].Time.After(src.Remove[0].Time) {
			t.Fatalf("retention of %s: %+v", src.VM, src)
		}
	}
	points, _, err := repoops.Ops{Service: s}.RepositoryPoints(ctx, &api.ListPointsInput{})
	if err != nil || len(points) != 2*vms {
		t.Fatalf("the preview removed points: %d left, %v", len(points), err)
	}
	if _, err := (planops.Ops{Service: s}).PolicyPreview(ctx, &api.PreviewPolicyInput{PolicyParam: api.PolicyParam{Policy: "nope"}}); service.Classify(err) != "invalid" {
		t.Fatalf("unknown policy: %v", err)
	}
}
