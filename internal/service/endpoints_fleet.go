package service

import (
	"context"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
)

// The endpoints of jobs, the VM inventory and policies.

type jobsIn struct {
	Policy string    `query:"policy" maxLength:"255"`
	Kind   string    `query:"kind" maxLength:"64" doc:"backup-policy, backup-vm, restore, verify, gc, ..."`
	User   string    `query:"user" maxLength:"64"`
	VM     string    `query:"vm" maxLength:"255" doc:"a VM's name or ID"`
	Status string    `query:"status" enum:"queued,running,success,partial,failed,cancelled"`
	Since  time.Time `query:"since" doc:"jobs created at or after this time"`
	Until  time.Time `query:"until" doc:"jobs created before this time"`
	// A page's size and where it starts: the console and scripts page
	// through a fleet's jobs instead of reading them all.
	BeforeID int64 `query:"before_id" minimum:"0" doc:"the last job of the previous page: the jobs after it in the listing"`
	Limit    int   `query:"limit" minimum:"0" maximum:"100000" doc:"the most jobs, newest first (0: all)"`
}

func epJobs(ctx context.Context, s *Service, in *jobsIn) (*Result[[]api.Job], error) {
	jobs, err := s.Jobs(ctx, JobsInput{Policy: in.Policy, Kind: in.Kind, User: in.User, VM: in.VM, Status: in.Status,
		Since: in.Since, Until: in.Until, BeforeID: in.BeforeID, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	actor := s.actor(ctx)
	out := []api.Job{}
	for _, j := range jobs {
		if canSeeJob(actor, j) {
			out = append(out, j)
		}
	}
	return result(out, nil)
}

type jobIn struct {
	ID int64 `path:"id" minimum:"1"`
}

func epJob(ctx context.Context, s *Service, in *jobIn) (*Result[*api.Job], error) {
	return result(visibleJob(ctx, s, in.ID))
}

type vmsIn struct {
	Connections []string `query:"connection,explode" required:"false" maxItems:"100" doc:"only these connections (repeat the parameter)"`
}

// epVMs lists the VMs the caller holds Conn.Audit on, and the failed
// inventories of the connections it sees something of.
func epVMs(ctx context.Context, s *Service, in *vmsIn) (*Result[*api.Inventory], error) {
	inv, err := s.VMs(ctx, VMsInput{Connections: in.Connections})
	if inv == nil {
		return nil, err
	}
	inv.VMs = visible(ctx, s, auth.ConnAudit, inv.VMs, func(v api.VM) []string { return []string{auth.VMPath(v.Connection, v.VM)} })
	actor := s.actor(ctx)
	errs := []api.ConnectionError{}
	for _, e := range inv.Errors {
		if auth.AllowedBelow(actor, auth.ConnectionPath(e.Connection), auth.ConnAudit) {
			errs = append(errs, e)
		}
	}
	inv.Errors = errs
	if len(errs) == 0 {
		err = nil // the caller sees no connection whose inventory failed
	}
	return result(inv, err)
}

type policyCheckIn struct {
	Offline bool `query:"offline" doc:"check without asking the hypervisors"`
}

func epPolicyCheck(ctx context.Context, s *Service, in *policyCheckIn) (*Result[*api.PolicyCheck], error) {
	return result(s.PolicyCheck(ctx, in.Offline))
}

type previewIn struct {
	Policy string `path:"policy" maxLength:"255"`
	Runs   int    `query:"runs" minimum:"0" maximum:"1000" default:"5" doc:"how many next runs to show"`
}

func epPolicyPreview(ctx context.Context, s *Service, in *previewIn) (*Result[*api.PolicyPreview], error) {
	return result(s.PolicyPreview(ctx, PolicyPreviewInput{Policy: in.Policy, Runs: in.Runs}))
}

type runPolicyIn struct {
	Policy string `path:"policy" maxLength:"255"`
	Wait   bool   `query:"wait" doc:"answer when the run has ended, with the finished job (default: at once, with the running job)"`
}

// epRunPolicy starts a policy's run. Not waited for, the run goes on in
// the server's background after the answer, which is the job as it
// starts (follow it with get-job).
func epRunPolicy(ctx context.Context, s *Service, in *runPolicyIn) (*Result[*api.Job], error) {
	if in.Wait {
		run, err := s.RunPolicy(ctx, in.Policy)
		if err != nil {
			return nil, err
		}
		return result(run.Wait())
	}
	bg, err := s.background("a policy run not waited for")
	if err != nil {
		return nil, err
	}
	started := make(chan error, 1)
	var run *PolicyRun
	err = bg.Work(ctx, func(ctx context.Context) {
		var err error
		run, err = s.RunPolicy(ctx, in.Policy)
		started <- err
		if err == nil {
			_, _ = run.Wait() // the engine records the outcome in the catalog
		}
	})
	if err == nil {
		err = <-started
	}
	if err != nil {
		return nil, err
	}
	return result(s.Job(ctx, run.Progress().JobID))
}

// TasksPath is where rights on every user's jobs are held (PBS's
// /system/tasks): Sys.Audit to see them, Sys.Modify to cancel them.
const TasksPath = auth.SystemPath + "/tasks"

// canSeeJob: one's own jobs, everyone's with Sys.Audit on /system/tasks,
// and those on what one may audit: a policy's runs with Policy.Audit on
// it, a repository's operations with Repo.Audit on it.
func canSeeJob(actor *auth.Subject, j api.Job) bool {
	switch {
	case actor != nil && j.User != "" && j.User == actor.User:
		return true
	case auth.Allowed(actor, TasksPath, auth.SysAudit):
		return true
	case j.Policy != "":
		return auth.Allowed(actor, auth.PolicyPath(j.Policy), auth.PolicyAudit)
	case strings.HasPrefix(j.Object, auth.RepositoriesPath+"/"):
		return auth.Allowed(actor, j.Object, auth.RepoAudit)
	}
	return auth.Allowed(actor, auth.PoliciesPath, auth.PolicyAudit) && j.Object == ""
}

// canCancelJob: one's own jobs, everyone's with Sys.Modify on
// /system/tasks, a policy's runs with Policy.Run on it.
func canCancelJob(actor *auth.Subject, j api.Job) bool {
	switch {
	case actor != nil && j.User != "" && j.User == actor.User:
		return true
	case auth.Allowed(actor, TasksPath, auth.SysModify):
		return true
	case j.Policy != "":
		return auth.Allowed(actor, auth.PolicyPath(j.Policy), auth.PolicyRun)
	}
	return false
}

// visibleJob fetches a job the caller may see (denied otherwise).
func visibleJob(ctx context.Context, s *Service, id int64) (*api.Job, error) {
	j, err := s.Job(ctx, id)
	if err != nil {
		return nil, err
	}
	if !canSeeJob(s.actor(ctx), *j) {
		return nil, api.Errorf(api.Denied, "%s may not see job %d: it is another user's, and %s lacks the audit privilege on %s",
			s.actor(ctx), j.ID, s.actor(ctx), or(j.Object, auth.PolicyPath(j.Policy)))
	}
	return j, nil
}

type jobLogIn struct {
	ID    int64 `path:"id" minimum:"1"`
	Start int64 `query:"start" minimum:"0" doc:"the last line already read (0: from the first)"`
	Limit int   `query:"limit" minimum:"0" maximum:"10000" doc:"the most lines (0: 500)"`
}

func epJobLog(ctx context.Context, s *Service, in *jobLogIn) (*Result[[]api.Event], error) {
	if _, err := visibleJob(ctx, s, in.ID); err != nil {
		return nil, err
	}
	return result(s.JobLog(ctx, JobLogInput{ID: in.ID, Start: in.Start, Limit: in.Limit}))
}

func epCancelJob(ctx context.Context, s *Service, in *jobIn) (*Result[*api.Job], error) {
	j, err := s.Job(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if !canCancelJob(s.actor(ctx), *j) {
		return nil, api.Errorf(api.Denied, "%s may not cancel job %d: it is another user's, and %s lacks %s on %s or %s on its policy",
			s.actor(ctx), j.ID, s.actor(ctx), auth.SysModify, TasksPath, auth.PolicyRun)
	}
	return result(s.CancelJob(ctx, in.ID))
}

type followJobIn struct {
	ID    int64 `path:"id" minimum:"1"`
	After int64 `query:"after" minimum:"0" doc:"the last log line already read (the Last-Event-ID header says the same)"`
}

// epFollowJob streams a job's events; a log line's event ID is its line
// number, so a client that reconnects with Last-Event-ID misses none.
func epFollowJob(ctx context.Context, s *Service, in *followJobIn, last int64, send func(string, int64, any) error) error {
	if _, err := visibleJob(ctx, s, in.ID); err != nil {
		return err
	}
	after := max(in.After, last)
	return s.FollowJob(ctx, in.ID, after, func(ev api.JobEvent) error {
		var id int64
		if ev.Line != nil {
			id = ev.Line.Seq
		}
		return send(ev.Type, id, ev)
	})
}
