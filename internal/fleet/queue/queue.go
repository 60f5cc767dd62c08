// Package queue is the durable hand-off of an admitted unit of work to a
// named worker: coffer's dispatcher decides what runs where (admission
// stays coffer's, docs/design/fleet.md), and River carries the decision
// to the worker in the catalog's own PostgreSQL database, so that a grant
// and its hand-off commit in one transaction (SubmitTx).
//
// One job kind, coffer_operation, runs any JSON operation of the service
// by its ID on the worker it names (queue w-<worker>). The worker checks
// its fence before it starts, runs the operation in its own process with
// its own configuration (repository passwords never travel in a job),
// and completes the job itself, in one transaction with a NOTIFY that
// wakes the submitter's Wait. River is used as a queue and nothing more:
// MaxAttempts 1 (coffer owns retries), no job timeout (coffer fences by
// heartbeat, not by River's rescuer).
//
// Only internal/fleet/... imports River (depguard: fleet-owns-river).
package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
)

const (
	// Kind is the River job kind of every hand-off.
	Kind = "coffer_operation"
	// Schema holds River's tables, apart from the catalog's (public).
	Schema = "river"
	// ProtocolVersion is the version of Args and Outcome: a worker runs
	// only jobs of the version it speaks (the registry refuses a worker
	// of another at registration; this is the last line). It is
	// fleet.Protocol (TestOneProtocol), which this package cannot import.
	ProtocolVersion = 3
	// ServerQueue is the queue of the servers' own client (see NewServer
	// for why servers run one).
	ServerQueue = "srv"
	// LeaderQueue is worked only by the server holding the schedules
	// lease (NewLeader): the other servers forward there what must run
	// in the leader's engine (Forward).
	LeaderQueue = "leader"
	// doneChannel is NOTIFYed with a job's ID when a worker completed it,
	// with its outcome when that fits (endPayload), and with the ID alone
	// when Cancel finalized it before it ran.
	doneChannel = "coffer_fleet_done"
)

// Args are a hand-off's arguments: what to run and for whom. They never
// hold a secret (SubmitTx refuses an input with a write-only field set):
// a worker has its own configuration and opens the repositories with it.
type Args struct {
	// Operation is the operation's ID (service.Operation.ID).
	Operation string `json:"operation"`
	// Input is the JSON of the operation's input struct
	// (op.Endpoint.Input()).
	Input json.RawMessage `json:"input"`
	// Worker and Epoch name the worker the grant went to, and its
	// registration: a job of an older epoch is stale (Fence).
	Worker   string `json:"worker"`
	Epoch    int64  `json:"epoch"`
	Protocol int    `json:"protocol"`
	// Job, Task and Attempt are the catalog's job and task (0: none) and
	// the attempt the grant is for: a hand-off is unique by them, so a
	// replayed insert of the same grant is skipped (see insertOpts).
	Job     int64 `json:"job" river:"unique"`
	Task    int64 `json:"task" river:"unique"`
	Attempt int   `json:"attempt" river:"unique"`
	// User and Token are who asked for a forwarded operation (the
	// authenticated user and the ID of their API token): the leader
	// records its job as theirs.
	User  string `json:"user,omitempty"`
	Token string `json:"token,omitempty"`
	// Resumes are, for a forwarded operation forwarded again after the
	// leader that took it was lost, the catalog jobs those leaders ran
	// it as (Outcome.Job), oldest first: its job carries them on
	// (job.WithResumes).
	Resumes []int64 `json:"resumes,omitempty"`
	// EndKey is the key the job's end notice carries its outcome under
	// (endnotice.go), drawn by the submitter.
	EndKey string `json:"end_key,omitempty"`
}

// Kind implements river.JobArgs.
func (Args) Kind() string { return Kind }

// Outcome is what a worker records on its job row (River's output) for
// the submitter: the operation's document and error, or why it did not
// run.
type Outcome struct {
	// Worker is the worker that completed the job.
	Worker string `json:"worker"`
	// Document is the operation's JSON document (null when it has none).
	Document json.RawMessage `json:"document,omitempty"`
	// ErrorClass and Error are the operation's error (api.Class and its
	// message); a document may come with one (a partial failure).
	ErrorClass string `json:"error_class,omitempty"`
	Error      string `json:"error,omitempty"`
	// Fenced: the job was stale (its worker's epoch was replaced, or the
	// worker cannot renew its registration) and completed without
	// running; Error says why.
	Fenced bool `json:"fenced,omitempty"`
	// Transient: the error is worth another attempt (a VM unit's
	// hypervisor.ErrTransient), which the leader's dispatcher decides.
	Transient bool `json:"transient,omitempty"`
	// LeaderEpoch is, for a forwarded operation (LeaderQueue), the epoch
	// of the schedules lease under which a leader took it: recorded on
	// the job's row as it starts, before its outcome replaces it.
	LeaderEpoch int64 `json:"leader_epoch,omitempty"`
	// Job is, for a forwarded operation, the catalog job the leader runs
	// it as, recorded beside LeaderEpoch once the job is (before any of
	// its attempts starts), so that a forwarder whose leader is lost can
	// name it to the next one (Args.Resumes).
	Job int64 `json:"job,omitempty"`
}

// Err is the outcome's error: nil when the operation succeeded.
func (o *Outcome) Err() error {
	switch {
	case o.Fenced:
		return fmt.Errorf("fenced on worker %s: %s", o.Worker, o.Error)
	case o.ErrorClass != "" || o.Error != "":
		return fmt.Errorf("%s (%s, on worker %s)", o.Error, o.ErrorClass, o.Worker)
	}
	return nil
}

// FenceFunc says whether a job granted to worker at epoch may still run:
// an error (the worker was replaced, declared lost, or cannot renew its
// own registration) makes the job complete as a no-op. The registry
// (internal/fleet) provides it.
type FenceFunc func(ctx context.Context, worker string, epoch int64) error

// LeaseFunc is the epoch of the schedules lease the process holds now, or
// why it holds it no more.
type LeaseFunc func(ctx context.Context) (epoch int64, err error)

// workerName is what River accepts in a queue's name (client.go's
// validation: lower case, digits, single separators, ≤ 64 characters with
// the "w-" prefix).
var workerName = regexp.MustCompile(`^[a-z0-9]+([_-]?[a-z0-9]+)*$`)

// WorkerQueue is the queue of the worker named name: each worker works
// its own, so a grant reaches exactly the worker it names.
func WorkerQueue(name string) (string, error) {
	if !workerName.MatchString(name) || len(name) > 62 {
		return "", fmt.Errorf("worker name %q: lower-case letters, digits and single - or _ between them, at most 62 characters", name)
	}
	return "w-" + name, nil
}
