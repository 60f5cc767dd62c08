package service_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/configobj"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/planops"
	"github.com/coffer-backup/coffer/internal/service/repoops"
	"github.com/coffer-backup/coffer/internal/service/servicetest"
)

// waitGuard bounds waits for what must happen: a failure guard, not a
// measurement.
const waitGuard = time.Minute

// TestConfigChangesAreSerialised: changes made at once by several servers
// never both pass their checks on the same state: of parallel updates made
// against one version exactly one goes through (the others are stale);
// and a connection's deletion racing a new policy that uses it never
// leaves the policy without its connection.
func TestConfigChangesAreSerialised(t *testing.T) {
	e := newConfEnv(t, "")
	servers := []*service.Service{e.service(), e.service(), e.service(), e.service()}
	ctx := e.ctx
	if _, err := servicetest.CreateObject(ctx, servers[0], "connection", spec(t, labSpec)); err != nil {
		t.Fatal(err)
	}
	p, err := servicetest.CreateObject(ctx, servers[0], "policy", spec(t, `{name: p, connection: lab}`))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(servers))
	for i, s := range servers {
		wg.Go(func() {
			_, errs[i] = servicetest.UpdateObject(ctx, s, "policy", "p", spec(t, fmt.Sprintf(`{connection: lab, tasks: %d}`, i+1)), p.Version)
		})
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch service.Classify(err) {
		case "":
			ok++
		case api.Conflict:
		default:
			t.Fatalf("a parallel update: %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d of %d parallel updates of version %d went through, want 1: %v", ok, len(servers), p.Version, errs)
	}

	for round := range 5 {
		conn := fmt.Sprintf("c%d", round)
		if _, err := servicetest.CreateObject(ctx, servers[0], "connection", spec(t, `{name: `+conn+`, kind: fake}`)); err != nil {
			t.Fatal(err)
		}
		var delErr, createErr error
		wg.Go(func() {
			_, delErr = servicetest.DeleteObject(ctx, servers[1], "connection", conn, 0)
		})
		wg.Go(func() {
			_, createErr = servicetest.CreateObject(ctx, servers[2], "policy", spec(t, `{name: uses-`+conn+`, connection: `+conn+`}`))
		})
		wg.Wait()
		if (delErr == nil) == (createErr == nil) {
			t.Fatalf("round %d: deleting the connection: %v; creating a policy on it: %v: want exactly one to succeed", round, delErr, createErr)
		}
		if _, err := (planops.Ops{Service: servers[3]}).PolicyCheck(ctx, &api.CheckPoliciesInput{Offline: true}); err != nil {
			t.Fatalf("round %d: the configuration is left invalid: %v", round, err)
		}
	}
}

// TestConfigObjectsSurviveRestart: objects created through one service
// are there for a new one on the same catalog (a restart, or another
// server), and the engine runs a policy made of them.
func TestConfigObjectsSurviveRestart(t *testing.T) {
	e := newConfEnv(t, "")
	s := e.service()
	if _, err := (repoops.Ops{Service: s}).InitWith(context.Background(), &api.InitRepositoryInput{}, repoops.InitOptions{Password: []byte("pw")}); err != nil {
		t.Fatal(err)
	}
	if _, err := servicetest.CreateObject(e.ctx, s, "connection", spec(t, labSpec)); err != nil {
		t.Fatal(err)
	}
	made, err := servicetest.CreateObject(e.ctx, s, "policy", spec(t, `{name: api-made, connection: lab}`))
	if err != nil {
		t.Fatal(err)
	}

	restarted := e.service()
	got, err := servicetest.GetObject(e.ctx, restarted, "policy", "api-made")
	if err != nil || got.Version != made.Version || got.Source != "catalog" || got.CreatedBy != "alice" {
		t.Fatalf("after a restart: %+v %v", got, err)
	}
	run, err := restarted.RunPolicy(e.ctx, "api-made")
	if err != nil {
		t.Fatal(err)
	}
	j, err := run.Wait()
	if err != nil || j.TasksTotal != 4 || j.TasksOK != 4 {
		t.Fatalf("run of the policy created through the API: %+v %v", j, err)
	}
	check, err := planops.Ops{Service: restarted}.PolicyCheck(e.ctx, &api.CheckPoliciesInput{Offline: false})
	if err != nil || len(check.Policies) != 1 || len(check.Policies[0].Selected) != 1 || len(check.Policies[0].Selected[0].VMs) != 4 {
		t.Fatalf("policy check of the API's policy: %+v %v", check, err)
	}
}

// next receives the next state, failing the test if none comes.
func next(t *testing.T, ch <-chan *configobj.State) *configobj.State {
	t.Helper()
	select {
	case st, open := <-ch:
		if !open {
			t.Fatal("the watch ended")
		}
		return st
	case <-time.After(waitGuard):
		t.Fatalf("no new configuration within %s", waitGuard)
	}
	return nil
}

// TestWatchConfigSeesChanges: a watcher gets the configuration in effect,
// then the one after each change: its own service's, and another
// server's (noticed by polling the catalog's generation).
func TestWatchConfigSeesChanges(t *testing.T) {
	e := newConfEnv(t, "connections: [{name: lab, kind: fake}]\n")
	s, other := e.service(), e.service()
	ctx, stop := context.WithCancel(e.ctx)
	defer stop()
	watch, err := s.WatchConfig(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st := next(t, watch); len(st.Engine.Connections) != 1 || len(st.Engine.Policies) != 0 {
		t.Fatalf("first state: %+v", st.Engine)
	}
	if _, err := servicetest.CreateObject(e.ctx, s, "policy", spec(t, `{name: a, connection: lab}`)); err != nil {
		t.Fatal(err)
	}
	if st := next(t, watch); len(st.Engine.Policies) != 1 || st.Engine.Policies[0].Name != "a" {
		t.Fatalf("after this service's change: %+v", st.Engine.Policies)
	}
	b, err := servicetest.CreateObject(e.ctx, other, "policy", spec(t, `{name: b, connection: lab}`))
	if err != nil {
		t.Fatal(err)
	}
	st := next(t, watch)
	if st.Generation != b.Version || len(st.Engine.Policies) != 2 {
		t.Fatalf("after another server's change: generation %d, policies %+v", st.Generation, st.Engine.Policies)
	}
	stop()
	for range watch { // closes when the context ends
	}
}

// TestPolicyPreviewOfADraft: a policy that is not saved is previewed from
// its spec (selection, next runs, what its keep rules would do to the
// points of the policy of its name), is refused with the file's messages
// when it would make the configuration invalid, and is not stored.
func TestPolicyPreviewOfADraft(t *testing.T) {
	e := newConfEnv(t, "connections: ["+labSpec+"]\npolicies: [{name: nightly, connection: lab}]\n")
	s := e.service()
	if _, err := (repoops.Ops{Service: s}).InitWith(context.Background(), &api.InitRepositoryInput{}, repoops.InitOptions{Password: []byte("pw")}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		run, err := s.RunPolicy(e.ctx, "nightly")
		if err != nil {
			t.Fatal(err)
		}
		if j, err := run.Wait(); err != nil || j.TasksOK != 4 {
			t.Fatalf("run: %+v %v", j, err)
		}
	}
	p, err := planops.Ops{Service: s}.PolicyDraftPreview(servicetest.AsLocal(e.ctx), &api.PreviewPolicyDraftInput{Runs: 2, Body: spec(t,
		`{name: nightly, connection: lab, select: {names: ["web-*", "db-*"]}, schedule: "30 1 * * *", retention: {keep-last: 1}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if p.Policy != "nightly" || len(p.Selected) != 1 || p.Selected[0].VMsTotal != 4 || len(p.Selected[0].VMs) != 2 {
		t.Fatalf("selection of the draft: %+v", p.Selected)
	}
	if len(p.NextRuns) != 2 || p.NextRuns[0].Hour() != 1 || p.NextRuns[0].Minute() != 30 {
		t.Fatalf("next runs of the draft: %v", p.NextRuns)
	}
	if len(p.Sources) != 4 {
		t.Fatalf("the draft's keep rules judge %d VMs' points, want the 4 nightly backed up: %+v", len(p.Sources), p.Sources)
	}
	for _, src := range p.Sources {
		if len(src.Keep) != 1 || len(src.Remove) != 1 {
			t.Fatalf("keep-last 1 of two points of %s: %+v", src.VM, src)
		}
	}
	unnamed, err := planops.Ops{Service: s}.PolicyDraftPreview(servicetest.AsLocal(e.ctx), &api.PreviewPolicyDraftInput{Body: spec(t, `{connection: lab}`)})
	if err != nil || unnamed.Policy != "draft" || len(unnamed.Selected[0].VMs) != 4 {
		t.Fatalf("a draft without a name: %+v %v", unnamed, err)
	}
	_, err = planops.Ops{Service: s}.PolicyDraftPreview(servicetest.AsLocal(e.ctx), &api.PreviewPolicyDraftInput{Body: spec(t, `{name: x, connection: nope, scheduel: "@daily"}`)})
	wantClass(t, "an invalid draft", err, api.Invalid, `unknown key "scheduel" in policies[0] (did you mean "schedule"?)`)
	_, err = planops.Ops{Service: s}.PolicyDraftPreview(servicetest.AsLocal(e.ctx), &api.PreviewPolicyDraftInput{Body: spec(t, `{name: x, connection: nope}`)})
	wantClass(t, "a draft on an unknown connection", err, api.Invalid, `policy x: unknown connection "nope" (known: lab)`)
	if objs, err := servicetest.ListObjects(e.ctx, s, "policies"); err != nil || len(objs) != 1 ||
		objs[0].Source != "file" || strings.Contains(fmt.Sprint(objs[0].Spec), "keep-last") {
		t.Fatalf("a preview stored its draft: %+v %v", objs, err)
	}
}

// TestSchedulesReloadChanges: a running server picks up policies created,
// changed and deleted through the API, by another server (noticed by
// polling) or by itself, without a restart.
func TestSchedulesReloadChanges(t *testing.T) {
	e := newConfEnv(t, "connections: ["+labSpec+"]\n")
	e.poll = 20 * time.Millisecond
	server, other := e.service(), e.service()
	if _, err := (repoops.Ops{Service: server}).InitWith(context.Background(), &api.InitRepositoryInput{}, repoops.InitOptions{Password: []byte("pw")}); err != nil {
		t.Fatal(err)
	}
	run := runServer(t, server)
	// waitJob waits for a finished job of a policy created after since,
	// and returns the newest.
	waitJob := func(policy string, since time.Time) api.Job {
		t.Helper()
		var found api.Job
		eventually(t, run, "a finished job of "+policy, func() bool {
			jobs, err := servicetest.ListJobs(e.ctx, other, &api.ListJobsInput{Policy: policy})
			if err != nil {
				t.Fatal(err)
			}
			for _, j := range jobs {
				if j.Status != "running" && j.Status != "cancelled" && j.Started.After(since) {
					found = j
					return true
				}
			}
			return false
		})
		return found
	}
	start := time.Now()
	if _, err := servicetest.CreateObject(e.ctx, other, "policy", spec(t, `{name: often, connection: lab, schedule: "@every 1s"}`)); err != nil {
		t.Fatal(err)
	}
	if j := waitJob("often", start); j.Status != "success" || j.TasksTotal != 4 {
		t.Fatalf("first run of the policy created on another server: %+v", j)
	}
	changed := time.Now()
	if _, err := servicetest.UpdateObject(e.ctx, server, "policy", "often", spec(t, `{connection: lab, schedule: "@every 1s", select: {names: ["web-*"]}}`), 0); err != nil {
		t.Fatal(err)
	}
	// A run started before the change may still select every VM; one
	// started after selects web-0000 alone.
	for {
		j := waitJob("often", changed)
		if j.TasksTotal == 1 && j.Status == "success" {
			break
		}
		changed = j.Started
	}
	if _, err := servicetest.DeleteObject(e.ctx, server, "policy", "often", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := servicetest.CreateObject(e.ctx, other, "policy", spec(t, `{name: later, connection: lab, schedule: "@every 1s"}`)); err != nil {
		t.Fatal(err)
	}
	later := waitJob("later", start)
	jobs, err := servicetest.ListJobs(e.ctx, other, &api.ListJobsInput{Policy: "often"})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Started.After(later.Started) {
			t.Fatalf("job %d of the deleted policy started at %s, after the reload that added later (%s)", j.ID, j.Started, later.Started)
		}
	}
}
