package vsphere_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/backupops"
	"github.com/coffer-backup/coffer/internal/service/jobops"
	"github.com/coffer-backup/coffer/internal/service/operations"
	"github.com/coffer-backup/coffer/internal/service/repoops"
	"github.com/coffer-backup/coffer/internal/service/restoreops"
)

// TestBackupVMByNameThroughTheService backs up one VM of three by name
// through service.BackupVM, the one function behind `coffer backup vm
// --connection` and the API's backup-vm (internal/cli tests the command
// line on the plain simulator, which has no changed block tracking): a
// full, then an incremental by its ID after writes that the CBT shim
// tracks as ESXi would. The incremental reads less than the full, each
// point restores to the disk's bytes at its backup, each backup is a job
// of kind backup-vm, no other VM is backed up and no snapshot is left on
// the VM.
func TestBackupVMByNameThroughTheService(t *testing.T) {
	ctx := context.Background()
	lab := vsphere.NewLab(t, 3, 4<<20)
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "vc.password")
	os.WriteFile(pwFile, []byte(lab.Password()+"\n"), 0o600)
	f, err := config.Parse(fmt.Appendf(nil, "connections:\n  - name: vc\n    kind: vsphere\n    options: {url: %q, user: %q, password-file: %q, thumbprint: %q}\n",
		lab.URL(), lab.User(), pwFile, lab.Thumbprint()))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policy.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	pw := func() ([]byte, error) { return []byte("correct horse"), nil }
	s := operations.New(service.Config{Repository: service.Location{Location: filepath.Join(dir, "repo"), Password: pw},
		Catalog: filepath.Join(dir, "catalog.db"), StateDir: filepath.Join(dir, "state"), Engine: eng, Local: true,
		Logger: slog.New(slog.DiscardHandler)})
	defer s.Close()
	if _, err := (repoops.Ops{Service: s}).InitWith(ctx, &api.InitRepositoryInput{}, repoops.InitOptions{Password: []byte("correct horse")}); err != nil {
		t.Fatal(err)
	}
	restore := func(id string) []byte {
		t.Helper()
		to := filepath.Join(dir, id+".raw")
		if _, err := (restoreops.Ops{Service: s}).RestoreDisks(ctx, &api.RestoreDiskInput{PointParam: api.PointParam{Point: id}, Body: api.RestoreRequest{To: to}}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(to)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	name, id := lab.VM(1)
	data := make([]byte, 512<<10)
	rand.Read(data)
	lab.Write(t, 1, 0, data)
	lab.Write(t, 1, 3<<20, data[:64<<10])
	full, err := backupops.Ops{Service: s}.BackupVM(ctx, &api.BackupVMInput{Connection: "vc", VM: name, Body: api.BackupVMRequest{Tags: map[string]string{"why": "upgrade"}}})
	if err != nil {
		t.Fatal(err)
	}
	want1 := lab.Read(t, 1)
	if full.VM != name || full.Mode != "full" || full.Tags["why"] != "upgrade" || full.Tags["policy"] != "" {
		t.Fatalf("first point %+v", full)
	}
	lab.Write(t, 1, 1<<20, bytes.Repeat([]byte("changed "), 1024))
	lab.Write(t, 1, (4<<20)-512, bytes.Repeat([]byte{0x55}, 512)) // the last sector
	// Without the change-tracking self-check, whose sample would read
	// most of so small a disk, the incremental reads only what changed.
	inc, err := backupops.Ops{Service: s}.BackupVM(ctx, &api.BackupVMInput{Connection: "vc", VM: id, Body: api.BackupVMRequest{Mode: "incremental", ChangeCheckSpans: -1}})
	if err != nil {
		t.Fatal(err)
	}
	want2 := lab.Read(t, 1)
	if inc.VM != name || inc.Mode != "incremental" || inc.Parent != full.ID || inc.ReadBytes >= full.ReadBytes {
		t.Fatalf("second point %+v after %+v: want an incremental reading less than the full", inc, full)
	}
	if got := restore(full.ID); !bytes.Equal(got, want1) {
		t.Fatal("the full differs from the disk at its backup")
	}
	if got := restore(inc.ID); !bytes.Equal(got, want2) {
		t.Fatal("the incremental differs from the disk at its backup")
	}
	points, _, err := repoops.Ops{Service: s}.RepositoryPoints(ctx, &api.ListPointsInput{})
	if err != nil || len(points) != 2 {
		t.Fatalf("points %+v %v: want the two of %s", points, err, name)
	}
	for _, p := range points {
		if p.VM != name || p.Connection != "vc" {
			t.Fatalf("a point of another VM: %+v", p)
		}
	}
	jobs, _, err := jobops.Ops{Service: s}.Jobs(auth.WithSubject(ctx, auth.Local()), &api.ListJobsInput{Kind: catalog.KindBackupVM})
	if err != nil {
		t.Fatal(err)
	}
	var ok int
	for _, j := range jobs {
		if j.Status == "success" && j.VM == name {
			ok++
		}
	}
	if ok != 2 {
		t.Fatalf("jobs %+v: want 2 successful backup-vm jobs of %s", jobs, name)
	}
	if n := lab.Snapshots(1); n != 0 {
		t.Fatalf("%d snapshots left on %s", n, name)
	}
}

// TestBackupVMRunsThePoliciesHooks: `coffer backup vm` runs the hooks of
// the policies protecting the VM on its connection, each once even when
// two policies share it, not those of a policy that selects other VMs;
// --no-hooks (NoHooks) runs none. The point records its hooks.
func TestBackupVMRunsThePoliciesHooks(t *testing.T) {
	ctx := context.Background()
	lab := vsphere.NewLab(t, 2, 1<<20)
	dir := t.TempDir()
	pwFile := filepath.Join(dir, "vc.password")
	os.WriteFile(pwFile, []byte(lab.Password()+"\n"), 0o600)
	name, _ := lab.VM(0)
	other, _ := lab.VM(1)
	log := filepath.Join(dir, "hooks.log")
	hook := func(policy, sel, tag string) string {
		return fmt.Sprintf(`  - name: %s
    connection: vc
    select: {names: [%q]}
    hooks:
      - name: app
        where: host
        pre: [/bin/sh, -c, 'echo pre-%s $COFFER_VM >> %s']
        post: [/bin/sh, -c, 'echo post-%s $COFFER_VM >> %s']
`, policy, sel, tag, log, tag, log)
	}
	f, err := config.Parse(fmt.Appendf(nil, "connections:\n  - name: vc\n    kind: vsphere\n    options: {url: %q, user: %q, password-file: %q, thumbprint: %q}\npolicies:\n%s%s%s",
		lab.URL(), lab.User(), pwFile, lab.Thumbprint(), hook("nightly", name, "app"), hook("hourly", name, "app"), hook("others", other, "other")))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := policy.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	pw := func() ([]byte, error) { return []byte("correct horse"), nil }
	s := operations.New(service.Config{Repository: service.Location{Location: filepath.Join(dir, "repo"), Password: pw},
		Catalog: filepath.Join(dir, "catalog.db"), StateDir: filepath.Join(dir, "state"), Engine: eng, Local: true,
		Logger: slog.New(slog.DiscardHandler)})
	defer s.Close()
	if _, err := (repoops.Ops{Service: s}).InitWith(ctx, &api.InitRepositoryInput{}, repoops.InitOptions{Password: []byte("correct horse")}); err != nil {
		t.Fatal(err)
	}
	p, err := backupops.Ops{Service: s}.BackupVM(ctx, &api.BackupVMInput{Connection: "vc", VM: name})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(log)
	if want := fmt.Sprintf("pre-app %s\npost-app %s\n", name, name); string(got) != want || p.Hooks != "ok" {
		t.Fatalf("hooks %q ran:\n%s\nwant:\n%s", p.Hooks, got, want)
	}
	p, err = backupops.Ops{Service: s}.BackupVM(ctx, &api.BackupVMInput{Connection: "vc", VM: name, Body: api.BackupVMRequest{NoHooks: true}})
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(log); !bytes.Equal(again, got) || p.Hooks != "" {
		t.Fatalf("with NoHooks: hooks %q, log\n%s", p.Hooks, again)
	}
	// The job's log names the route each disk took: the lab's host has
	// no reachable address, so it is vCenter's datastore service.
	jobs, _, err := jobops.Ops{Service: s}.Jobs(auth.WithSubject(ctx, auth.Local()), &api.ListJobsInput{Kind: catalog.KindBackupVM})
	if err != nil || len(jobs) != 2 {
		t.Fatalf("jobs %+v %v", jobs, err)
	}
	j, err := jobops.Ops{Service: s}.Job(auth.WithSubject(ctx, auth.Local()), &api.GetJobInput{JobParam: api.JobParam{ID: jobs[0].ID}, Log: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var route string
	for _, e := range j.Body.Events {
		if e.Kind == "data-path" {
			route = e.Message
		}
	}
	if !strings.Contains(route, "read through vCenter's datastore service (the host could not be used)") {
		t.Fatalf("the job's log says of the route: %q", route)
	}
}
