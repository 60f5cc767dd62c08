package backupops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"context"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/telemetry"
)

// BackupPolicy starts a policy's run. Not waited for, the run goes on in
// the server's background after the answer, which is the job as it
// starts (follow it with get-job). (RunPolicy starts a run and returns
// its handle, which the command line watches as it goes.)
// A server of a fleet that does not lead forwards it to the leader.
func (s Ops) BackupPolicy(ctx context.Context, in *api.BackupPolicyInput) (*api.Job, error) {
	if j, forwarded, err := s.policyRunOnLeader(ctx, in); forwarded {
		return j, err
	}
	if in.Wait {
		run, err := s.RunPolicy(ctx, in.Policy)
		if err != nil {
			return nil, err
		}
		return run.Wait()
	}
	bg, err := s.Background("a policy run not waited for")
	if err != nil {
		return nil, err
	}
	started := make(chan error, 1)
	var run *service.PolicyRun
	err = bg.Work(ctx, func(ctx context.Context) {
		// The run after the answer is a span of its own, in the
		// request's trace.
		ctx, span := telemetry.Operation(ctx, "backup-policy (background)", false)
		span.Set("coffer.policy", in.Policy)
		var err error
		run, err = s.RunPolicy(ctx, in.Policy)
		started <- err
		if err == nil {
			var j *api.Job
			j, err = run.Wait() // the engine records the outcome in the catalog
			if j != nil {
				span.SetInt("coffer.job", int(j.ID))
				span.Set("coffer.job_status", string(j.Status))
			}
		}
		span.End(err)
	})
	if err == nil {
		err = <-started
	}
	if err != nil {
		return nil, err
	}
	return s.JobPage(ctx, service.JobPageInput{ID: run.Progress().JobID})
}
