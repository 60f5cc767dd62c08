package queue

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/rivertype"

	"github.com/coffer-backup/coffer/internal/job"
)

// NewLeader is the client of the server holding the schedules lease,
// started when it takes the lease and stopped when it loses it: it works
// LeaderQueue, where the other servers forward what must run in the
// leader's engine (a policy run or a VM's backup started through their
// API), so that it runs under the leader's limits and lease epoch.
// cfg.Fence should refuse a job once this server no longer holds the
// lease (between losing it and Stop). It takes no part in River's
// election: the server's own client (NewServer) does.
func NewLeader(pool *pgxpool.Pool, cfg Config) (*Client, error) {
	cfg.Name, cfg.Epoch = "leader", 0
	return newClient(pool, cfg, LeaderQueue, false)
}

// TakenUnder is the epoch of the schedules lease under which a leader
// runs forwarded job id (Config.Lease), and the catalog job it runs it
// as once recorded (0 before), with running false once the job has
// ended or before a leader took it (epoch 0).
func (c *Client) TakenUnder(ctx context.Context, id int64) (epoch, catalogJob int64, running bool, err error) {
	row, err := c.river.JobGet(ctx, id)
	if err != nil {
		return 0, 0, false, fmt.Errorf("fleet: forwarded job %d: %w", id, err)
	}
	if row.State != rivertype.JobStateRunning {
		return 0, 0, false, nil
	}
	var o Outcome
	if out := row.Output(); out != nil {
		if err := json.Unmarshal(out, &o); err != nil {
			return 0, 0, true, fmt.Errorf("fleet: forwarded job %d's epoch: %w", id, err)
		}
	}
	return o.LeaderEpoch, o.Job, true, nil
}

// Forward hands operation op, with its input in, to LeaderQueue as asked
// by user: the server that holds the schedules lease runs it, at once or,
// while none does, once one takes the lease, carrying on the catalog jobs
// resumes (Args.Resumes). Wait for its outcome.
func (c *Client) Forward(ctx context.Context, op string, in any, user job.User, resumes []int64) (Submitted, error) {
	args, opts, err := handOff(Unit{Operation: op, Input: in})
	if err != nil {
		return Submitted{}, err
	}
	args.User, args.Token, args.Resumes = user.Name, user.Token, resumes
	opts.Queue = LeaderQueue
	res, err := c.river.Insert(ctx, args, opts)
	if err != nil {
		return Submitted{}, fmt.Errorf("fleet: forward %s to the leader: %w", op, err)
	}
	return Submitted{ID: res.Job.ID, key: args.EndKey}, nil
}

// worksWorkerQueue: this client is a worker's, which runs what a server
// handed to it by name (and records no job of its own for it).
func (c *Client) worksWorkerQueue() bool {
	return c.queue != ServerQueue && c.queue != LeaderQueue
}
