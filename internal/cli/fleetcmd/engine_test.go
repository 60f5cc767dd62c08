package fleetcmd_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

const engineConfig = `
connections:
  - name: lab
    kind: fake
    options: {seed: 5, vms: 6, hosts: 2, datastores: 3, disk-size: 256KiB, fail: [db-0001]}
limits:
  tasks: 4
  per-datastore: 2
policies:
  - name: web
    connection: lab
    select: {names: ["web-*"]}
    retention: {keep-last: 3}
  - name: all
    connection: lab
    retries: {attempts: 1}
    schedule: "@daily"
`

func TestRunJobsVMsPolicyCheck(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	e.Config(engineConfig)

	var res api.Job
	if err := json.Unmarshal([]byte(e.Must("run", "web", "--json")), &res); err != nil {
		t.Fatal(err)
	}
	if res.Status != "success" || len(res.Tasks) != 1 || res.Tasks[0].VM != "web-0000" || res.Tasks[0].PointID == "" {
		t.Fatalf("run web: %+v", res)
	}
	out := e.Expect(command.ExitPartial, "run", "all")
	for _, want := range []string{"FAILED  db-0001", "simulated failure", "partial, 5 of 6 VMs backed up", "ok      web-0000"} {
		if !strings.Contains(out, want) {
			t.Errorf("run all output lacks %q:\n%s", want, out)
		}
	}
	var jobs []api.Job
	if err := json.Unmarshal([]byte(e.Must("jobs", "--json")), &jobs); err != nil || len(jobs) != 2 || jobs[0].Status != "partial" {
		t.Fatalf("jobs: %+v %v", jobs, err)
	}
	// Runs of policies are tasks: what they act on, the process that ran
	// them, their final progress, their numbered log.
	if j := jobs[0]; j.Kind != "backup-policy" || j.Object != "/policies/all" || j.OwnerPID == 0 || j.LogLines == 0 ||
		j.Progress == nil || j.Progress.ItemsDone != 6 || j.Progress.ItemsTotal != 6 {
		t.Fatalf("run of policy all: %+v", j)
	}
	var onDB []api.Job
	if err := json.Unmarshal([]byte(e.Must("jobs", "--vm", "db-0001", "--kind", "backup-policy", "--json")), &onDB); err != nil ||
		len(onDB) != 1 || onDB[0].ID != jobs[0].ID {
		t.Fatalf("jobs on VM db-0001: %+v %v", onDB, err)
	}
	var shown api.Job
	if err := json.Unmarshal([]byte(e.Must("job", "show", fmt.Sprint(jobs[0].ID), "--json")), &shown); err != nil ||
		int64(len(shown.Events)) != shown.LogLines || shown.Events[0].Seq != 1 || shown.Events[0].Kind != "job-start" {
		t.Fatalf("job show --json: %d events of %d lines, first %+v (%v)", len(shown.Events), shown.LogLines, shown.Events[:min(1, len(shown.Events))], err)
	}
	show := e.Must("job", "show", fmt.Sprint(jobs[0].ID))
	for _, want := range []string{"TASKS", "EVENTS", "db-0001", "task-failed", "snapshot-create", "job-end", "on /policies/all"} {
		if !strings.Contains(show, want) {
			t.Errorf("job show lacks %q:\n%s", want, show)
		}
	}
	e.Expect(command.ExitUsage, "job", "show", "x")
	e.Expect(command.ExitNoRepo, "job", "show", "999") // not found

	vms := clitest.VMsJSON(t, e)
	if len(vms) != 6 {
		t.Fatalf("vms: %v", vms)
	}
	for _, v := range vms {
		switch v.VM {
		case "web-0000":
			if !v.Covered || strings.Join(v.Policies, ",") != "web,all" || v.LastBackup.IsZero() {
				t.Errorf("web-0000: %+v", v)
			}
		case "db-0001":
			if v.Covered || len(v.Policies) != 1 {
				t.Errorf("db-0001 (always failing): %+v", v)
			}
		}
	}
	// The protection summary counts what the listing shows (every point
	// is minutes old: within the default RPO).
	var sum api.ProtectionSummary
	if err := json.Unmarshal([]byte(e.Must("vms", "protection", "--json")), &sum); err != nil {
		t.Fatal(err)
	}
	want := api.ProtectionSummary{Total: len(vms)}
	for _, v := range vms {
		switch {
		case len(v.Policies) == 0:
			want.NoPolicy++
		case v.LastBackup.IsZero():
			want.NoPoint++
		default:
			want.WithinRPO++
		}
	}
	if got := [...]int{sum.Total, sum.WithinRPO, sum.OutsideRPO, sum.NoPoint, sum.NoPolicy}; got != [...]int{want.Total, want.WithinRPO, 0, want.NoPoint, want.NoPolicy} ||
		want.WithinRPO == 0 || want.NoPoint == 0 || len(sum.Attention) != want.NoPoint+want.NoPolicy {
		t.Errorf("vms protection: %+v, the listing says %+v", sum, want)
	}
	var attention api.Inventory
	if err := json.Unmarshal([]byte(e.Must("vms", "--order", "attention", "--attention", "--json")), &attention); err != nil {
		t.Fatal(err)
	}
	if attention.Counts == nil || attention.Counts.Matched != len(sum.Attention) || len(attention.VMs) != len(sum.Attention) {
		t.Errorf("vms --order attention --attention: %d VMs, counts %+v; the summary names %d", len(attention.VMs), attention.Counts, len(sum.Attention))
	}
	check := e.Must("policy", "check")
	for _, want := range []string{"configuration is valid", "policy web:", "lab: 1 of 6 VMs: web-0000", `schedule "@daily"`} {
		if !strings.Contains(check, want) {
			t.Errorf("policy check lacks %q:\n%s", want, check)
		}
	}
	preview := e.Must("policy", "preview", "web")
	for _, want := range []string{"policy web selects:", "lab: 1 of 6 VMs: web-0000", "no schedule: it runs with `coffer run web`", "retention (", "web-0000: keep 1, remove 0"} {
		if !strings.Contains(preview, want) {
			t.Errorf("policy preview lacks %q:\n%s", want, preview)
		}
	}
	e.Expect(command.ExitUsage, "policy", "preview", "nope")
	e.Expect(command.ExitUsage, "run", "nope")
}

func TestPolicyCheckReportsEveryProblem(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Config(`
connections: [{name: lab, kind: fake}, {name: far, kind: hyperv}]
policies:
  - {name: a, connection: lab, schedule: "61 * * * *"}
  - {name: b, connection: lab, select: {names: ["web-["]}, mode: weekly}
`)
	out := e.Expect(command.ExitUsage, "policy", "check", "--offline")
	for _, want := range []string{`policy a: schedule "61 * * * *"`, `bad pattern "web-["`, `mode: "weekly"`} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	e.Config("connections: [{name: far, kind: hyperv}]\npolicies: [{name: a, connection: far}]\n")
	if out := e.Expect(command.ExitUsage, "run", "a"); !strings.Contains(out, `no "hyperv" connector`) {
		t.Fatalf("unknown kind: %s", out)
	}
	e.Config("policies: [{name: a, conection: far}]\n")
	if out := e.Expect(command.ExitUsage, "policy", "check"); !strings.Contains(out, `did you mean "connection"`) {
		t.Fatalf("typo: %s", out)
	}
}

// TestImmutablePolicyNeedsALockingRepository: a policy with immutable-for
// over a repository that cannot lock objects (a local directory) is
// reported by policy check, and a run refuses to make points the policy
// promises are undeletable, saying what to do.
func TestImmutablePolicyNeedsALockingRepository(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	e.Config(`
connections: [{name: lab, kind: fake, options: {vms: 2, disk-size: 256KiB}}]
policies:
  - {name: locked, connection: lab, immutable-for: 30d}
`)
	if out := e.Expect(command.ExitUsage, "policy", "check"); !strings.Contains(out, "cannot lock objects: use an S3 bucket with Object Lock, or remove immutable-for") {
		t.Fatalf("policy check: %s", out)
	}
	if out := e.Must("policy", "check", "--offline"); !strings.Contains(out, "immutable for 720h0m0s") {
		t.Fatalf("policy check --offline: %s", out)
	}
	out := e.Expect(command.ExitFailure, "run", "locked")
	if !strings.Contains(out, "asks for immutable-for, but repository (default)") || !strings.Contains(out, "cannot lock objects") {
		t.Fatalf("run: %s", out)
	}
	if snaps := clitest.SnapshotsJSON(t, e); len(snaps) != 0 {
		t.Fatalf("%d points made without the lock the policy asks for", len(snaps))
	}
	// Nor can a local repository have locked objects hidden by a delete.
	if out := e.Expect(command.ExitUsage, "repair", "undelete"); !strings.Contains(out, "keeps no versions of objects") {
		t.Fatalf("repair undelete on a local repository: %s", out)
	}
}

// A run whose process is killed is not shown running forever: coffer jobs
// marks it failed, interrupted, naming the process that died.
func TestJobsMarksTheRunOfAKilledProcessInterrupted(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	e.Config(`
connections:
  - name: lab
    kind: fake
    options: {seed: 3, vms: 1, disk-size: 128KiB, snapshot-create: 1h}
policies:
  - name: stuck
    connection: lab
`)
	run := e.Child("run", "stuck")
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	deadline := time.Now().Add(time.Minute)
	for {
		var jobs []api.Job
		if code, out, _ := e.Run("jobs", "--json"); code == 0 && json.Unmarshal([]byte(out), &jobs) == nil &&
			len(jobs) == 1 && jobs[0].Status == "running" && jobs[0].OwnerPID == run.Process.Pid {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("coffer run exited early: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("coffer run recorded no running job within a minute")
		}
		time.Sleep(50 * time.Millisecond) // polling interval
	}
	if err := run.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-done
	var jobs []api.Job
	if err := json.Unmarshal([]byte(e.Must("jobs", "--json")), &jobs); err != nil || len(jobs) != 1 {
		t.Fatalf("jobs: %+v %v", jobs, err)
	}
	want := fmt.Sprintf("interrupted: the coffer process that ran it (pid %d on ", run.Process.Pid)
	if jobs[0].Status != "failed" || !strings.HasPrefix(jobs[0].Error, want) {
		t.Fatalf("the run of the killed process: %s %q, want failed %q...", jobs[0].Status, jobs[0].Error, want)
	}
}
