package servicetest

import (
	"context"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/fleetops"
	"github.com/coffer-backup/coffer/internal/service/jobops"
)

// The tests read jobs as the local operator, who sees every job: the
// listing and the job document show the caller only what it may see.

// ListJobs is a page of jobs (in.Limit, 0: 100) as the local operator.
func ListJobs(ctx context.Context, s *service.Service, in *api.ListJobsInput) ([]api.Job, error) {
	jobs, _, err := jobops.Ops{Service: s}.Jobs(auth.WithSubject(ctx, auth.Local()), in)
	return jobs, err
}

// WholeJob is a job with its tasks and log, as far as one page of each
// (1,000) holds them (the tests' jobs are smaller), as the local operator.
func WholeJob(ctx context.Context, s *service.Service, id int64) (*api.Job, error) {
	d, err := jobops.Ops{Service: s}.Job(auth.WithSubject(ctx, auth.Local()), &api.GetJobInput{JobParam: api.JobParam{ID: id}, Tasks: 1000, Log: 1000})
	if err != nil {
		return nil, err
	}
	return d.Body, nil
}

// AsLocal is ctx of the local operator, who may see and do everything.
func AsLocal(ctx context.Context) context.Context { return auth.WithSubject(ctx, auth.Local()) }

// ListVMs is a page of the inventory as the local operator, who sees
// every VM: every VM of the tests' fleets when in.Limit is 0 (the API's
// page is then 100; the largest, 1,000, holds any test's fleet).
func ListVMs(ctx context.Context, s *service.Service, in api.ListVMsInput) (*api.Inventory, error) {
	if in.Limit == 0 {
		in.Limit = 1000
	}
	page, err := fleetops.Ops{Service: s}.VMs(AsLocal(ctx), &in)
	if page == nil {
		return nil, err
	}
	return page.Body, err
}

// Protection is the protection summary as the local operator, who sees
// every VM.
func Protection(ctx context.Context, s *service.Service, in api.ProtectionSummaryInput) (*api.ProtectionSummary, error) {
	return fleetops.Ops{Service: s}.ProtectionSummary(AsLocal(ctx), &in)
}
