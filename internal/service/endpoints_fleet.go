package service

import (
	"context"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
)

// The endpoints of jobs, the VM inventory and policies.

type jobsIn struct {
	Policy string `query:"policy" maxLength:"255"`
	Status string `query:"status" enum:"queued,running,success,partial,failed,cancelled"`
	Limit  int    `query:"limit" minimum:"0" maximum:"100000" doc:"the most jobs, newest first (0: all)"`
}

// jobPath is the ACL path that grants seeing a job: its policy's.
func jobPath(j api.Job) []string {
	if j.Policy == "" {
		return []string{auth.PoliciesPath}
	}
	return []string{auth.PolicyPath(j.Policy)}
}

func epJobs(ctx context.Context, s *Service, in *jobsIn) (*Result[[]api.Job], error) {
	jobs, err := s.Jobs(ctx, JobsInput{Policy: in.Policy, Status: in.Status, Limit: in.Limit})
	if err != nil {
		return nil, err
	}
	return result(visible(ctx, s, auth.PolicyAudit, jobs, jobPath), nil)
}

type jobIn struct {
	ID int64 `path:"id" minimum:"1"`
}

func epJob(ctx context.Context, s *Service, in *jobIn) (*Result[*api.Job], error) {
	j, err := s.Job(ctx, in.ID)
	if err != nil {
		return nil, err
	}
	if len(visible(ctx, s, auth.PolicyAudit, []api.Job{*j}, jobPath)) == 0 {
		return nil, api.Errorf(api.Denied, "%s lacks %s on %s to see job %d", s.actor(ctx), auth.PolicyAudit, jobPath(*j)[0], j.ID)
	}
	return result(j, nil)
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
