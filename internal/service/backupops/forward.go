package backupops

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/service"
)

// leaderForwarder is the fleet's way to run an operation in the engine of
// the server holding the schedules lease, from a server that does not
// hold it (fleet.Forwarder, which a fleet's server's Remote is too): only
// the leader's units are run by the workers. forwarded is false where
// this server runs it itself (it leads).
type leaderForwarder interface {
	ToLeader(ctx context.Context, operation string, in any) (doc json.RawMessage, forwarded bool, resumes []int64, err error)
}

// onLeader runs operation id on the leader when this server is a fleet's
// server that does not lead (forwarded), and returns the leader's answer.
// When this server runs it itself, having taken the lease while it was
// forwarded, resumes are the jobs lost leaders ran it as, for
// job.WithResumes.
func onLeader[T any](ctx context.Context, s Ops, id string, in any) (out T, forwarded bool, resumes []int64, err error) {
	f, ok := s.RemoteRunner().(leaderForwarder)
	if !ok {
		return out, false, nil, nil
	}
	doc, forwarded, resumes, err := f.ToLeader(ctx, id, in)
	if forwarded && len(doc) > 0 && string(doc) != "null" {
		if jerr := json.Unmarshal(doc, &out); jerr != nil {
			return out, true, nil, api.WithClass(api.Internal, fmt.Errorf("the leader's answer to %s: %w", id, jerr))
		}
	}
	return out, forwarded, resumes, err
}

// policyRunOnLeader starts the policy's run on the leader when this
// server does not lead: the run's start goes there (the leader answers
// with the job as it starts), and a run waited for is followed here in
// the catalog they share until it ends, as RunPolicy's Wait would, the
// caller giving up cancelling it.
func (s Ops) policyRunOnLeader(ctx context.Context, in *api.BackupPolicyInput) (*api.Job, bool, error) {
	start := *in
	start.Wait = false
	j, forwarded, _, err := onLeader[*api.Job](ctx, s, "backup-policy", &start)
	if !forwarded || err != nil || !in.Wait {
		return j, forwarded, err
	}
	if j == nil {
		return nil, true, api.Errorf(api.Internal, "the leader started policy %s's run without saying its job", in.Policy)
	}
	j, err = s.waitJob(ctx, j.ID)
	return j, true, err
}

// waitJob waits for job id to end, following it in the catalog, and
// returns it with the error PolicyRun.Wait gives for its status.
func (s Ops) waitJob(ctx context.Context, id int64) (*api.Job, error) {
	m, err := s.JobManager(ctx)
	if err != nil {
		return nil, err
	}
	for {
		sub, err := m.Subscribe(ctx, id, 0)
		if err != nil {
			return nil, err
		}
		for range sub.C { // to its final status
		}
		if ctx.Err() != nil {
			u, _ := job.UserFrom(ctx)
			_, cerr := m.Cancel(context.WithoutCancel(ctx), id, u.Name)
			return nil, errors.Join(api.Errorf(api.Cancelled, "%w: job %d: the caller gave up", context.Cause(ctx), id), cerr)
		}
		if errors.Is(sub.Err(), job.ErrLagged) {
			continue
		}
		break
	}
	d, err := s.JobPage(ctx, service.JobPageInput{ID: id})
	if err != nil {
		return nil, err
	}
	switch d.Status {
	case "success":
		return d, nil
	case "partial":
		return d, api.Errorf(api.Partial, "job %d: %s", id, d.Error)
	case "cancelled":
		return d, api.Errorf(api.Cancelled, "%w: job %d: %s", context.Canceled, id, d.Error)
	case "running", "queued":
		return d, api.Errorf(api.Internal, "job %d: its following ended before it did", id)
	}
	return d, api.Errorf(api.Internal, "job %d failed: %s", id, d.Error)
}
