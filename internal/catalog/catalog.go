// Package catalog records what coffer did: jobs, per-VM tasks, events with
// throughput and durations, backup points and the VM inventory seen last.
//
// The catalog is a cache and a history, never the source of truth for data:
// every backup point can be listed and restored from the repository alone,
// and `coffer catalog rebuild` recreates the backup-point tables from it.
//
// Implementations: sqlite (default, pure Go) and postgres (scale-out); both
// pass the conformance suite in catalog/catalogtest. Schemas are versioned
// with migrations applied at Open.
//
// Conventions every implementation follows:
//   - Times are stored in UTC with microsecond precision; a zero time stays
//     zero. CreateJob sets CreatedAt, and AddEvents an event's Time, to now
//     when it is zero.
//   - JSON fields (Warnings, Datastores, Tags, Fields) read back nil when
//     they were empty; numbers in Event.Fields read back as float64.
//   - Lists are newest first (jobs by CreatedAt, events by Time, backup
//     points by Time), except tasks (creation order), VMs (by
//     connection, name, ID) and a job's log (by Seq); ties are broken by
//     ID, newest first.
//   - Creating a task or event that refers to a missing job or task fails
//     with an error wrapping ErrNotFound, as do updates of missing rows.
//     Deleting absent backup points is not an error.
package catalog

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned when a job, task or backup point does not exist.
var ErrNotFound = errors.New("catalog: not found")

// ErrFinished is returned when a change meant for a running job (a cancel
// request) finds it already finished.
var ErrFinished = errors.New("catalog: job already finished")

// Status of a job or task.
type Status string

const (
	StatusQueued    Status = "queued"
	StatusRunning   Status = "running"
	StatusSuccess   Status = "success"
	StatusPartial   Status = "partial" // job only: some tasks failed
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
)

// Done reports a terminal status.
func (s Status) Done() bool {
	return s == StatusSuccess || s == StatusPartial || s == StatusFailed || s == StatusCancelled
}

// Task is the work on one VM within a job.
type Task struct {
	ID            int64
	JobID         int64
	Connection    string
	VMID          string
	VMName        string
	Host          string
	Datastores    []string
	Status        Status
	Mode          string // "full", "incremental", "differential"
	SnapshotMode  string // as requested by the policy
	Attempts      int
	StartedAt     time.Time
	FinishedAt    time.Time
	BytesLogical  int64 // disk bytes covered
	BytesRead     int64 // bytes read from the hypervisor
	BytesStored   int64 // new bytes written to the repository (after dedup/compression)
	BackupPointID string
	Warnings      []string
	Error         string
	// SnapshotModeAchieved is the backup point's achieved snapshot mode
	// (weaker than SnapshotMode after a fallback); empty until the task
	// has a point.
	SnapshotModeAchieved string
}

// Event is a timestamped record about a job or task (phase transitions,
// warnings, throughput samples). The events of a job are its log: AddEvents
// numbers them 1, 2, 3... in the order they are recorded (Seq), whichever
// process records them.
type Event struct {
	ID     int64
	Time   time.Time
	JobID  int64
	TaskID int64 // 0 for job-level events
	// Seq is the event's line number in its job's log, set by AddEvents
	// (ignored on input); 0 for events of no job.
	Seq   int64
	Level string // "info", "warn", "error"
	Kind  string // "snapshot-created", "disk-done", "retry", "cleanup", ...
	// Message is human-readable; Fields carry numbers (bytes, seconds,
	// MB/s) for dashboards.
	Message string
	Fields  map[string]any
}

// BackupPoint mirrors one snapshot manifest of a repository.
type BackupPoint struct {
	Repository   string // repository ID
	ID           string // snapshot ID (hex)
	Time         time.Time
	Connection   string
	VMID         string
	VMName       string
	Mode         string // "full", "incremental", "differential", "disk"
	Parent       string
	Disks        int
	BytesLogical int64
	BytesStored  int64
	Tags         map[string]string
	Protected    bool
	JobID        int64
	// SnapshotMode was requested (none for disk images),
	// SnapshotModeAchieved really carried out; the latter is empty for
	// manifests written before coffer recorded it.
	SnapshotMode         string
	SnapshotModeAchieved string
	// Hooks is how the application hooks went (repo.Point.Hooks).
	Hooks string
}

// PolicyPointTime is the time of a VM's newest point among those a
// policy made.
type PolicyPointTime struct {
	Connection, VMName string
	Policy             string // "" for points made by hand
	Time               time.Time
}

// VMRef names a VM: its ID within a connection.
type VMRef struct {
	Connection string
	ID         string
}

// VMRecord is the last inventory seen for a VM.
type VMRecord struct {
	Connection string
	ID         string
	Name       string
	Host       string
	Datastores []string
	Tags       map[string]string
	Bytes      int64
	LastSeen   time.Time
	// The hypervisor's view of it at the last refresh (inventory.go).
	PowerState     string
	ChangeTracking bool
	GuestAgent     bool
	Disks          []DiskRecord
	// Policies select it in the configuration of the last refresh;
	// Protected is whether any does (a filter of the listing).
	Policies  []string
	Protected bool
	// Busy: its connection could not describe it at the last refresh (a
	// backup held its monitor), so the rest is its last known state.
	Busy bool
}

// Filters select rows; zero fields match everything. Limit 0 means no limit.
type TaskFilter struct {
	JobID  int64
	VMID   string
	Status Status
	// AfterID continues a listing after this task (tasks are listed in
	// creation order, by ID).
	AfterID int64
	Limit   int
}

type EventFilter struct {
	JobID  int64
	TaskID int64
	// Kinds, when set, are the only kinds of event listed (a reader
	// that wants a few kinds of a job's thousands of lines).
	Kinds []string
	Since time.Time
	Limit int
}

type BackupPointFilter struct {
	Repository string
	VMID       string
	VMName     string
	Since      time.Time
	// After continues a listing after this point (keyset paging; stable
	// while points are added).
	After PointCursor
	Limit int // newest first
}

// PointCursor is a position in the listing of backup points, which is
// by Time (newest first), then ID (descending), then Repository: the
// last point of a page.
type PointCursor struct {
	Time       time.Time
	ID         string
	Repository string
}

// Cursor is the position of p in the listing.
func (p BackupPoint) Cursor() PointCursor {
	return PointCursor{Time: p.Time, ID: p.ID, Repository: p.Repository}
}

// Catalog is the store of jobs, tasks, events, backup points, VMs and the
// access-control records of the server (access.go). All
// methods are safe for concurrent use. Writes are durable when they return.
type Catalog interface {
	CreateJob(ctx context.Context, j *Job) error // sets j.ID
	// UpdateJob rewrites every field of a job but CancelRequested and
	// LogLines.
	UpdateJob(ctx context.Context, j *Job) error
	GetJob(ctx context.Context, id int64) (Job, error)
	ListJobs(ctx context.Context, f JobFilter) ([]Job, error) // newest first

	// Heartbeat records that a running job's owner is alive (now) and,
	// when p is not nil, its progress. It returns when a cancel was
	// requested (zero if not). A job that is missing or already finished
	// is an error wrapping ErrNotFound.
	Heartbeat(ctx context.Context, id int64, p *Progress) (cancelRequested time.Time, err error)
	// RequestCancel marks a queued or running job to be cancelled (the
	// first request's time is kept) and, when msg is not empty, appends
	// it to the job's log as a warning (kind "cancel"), in one
	// transaction: the owner sees the request only with its line. It
	// returns the job. A finished job is returned with an error wrapping
	// ErrFinished.
	RequestCancel(ctx context.Context, id int64, msg string) (Job, error)
	// AbandonJob ends a job whose owner is gone: if it is still unfinished
	// and its Heartbeat is still lastSeen (no sign of life since the
	// caller judged it gone), it gets status and msg as its error, now as
	// its end, and msg as an error line in its log, in one transaction.
	// It reports whether it did.
	AbandonJob(ctx context.Context, id int64, lastSeen time.Time, status Status, msg string) (bool, error)
	// PruneHistory deletes, in one transaction, at most limit rows of the
	// history of jobs that finished before `before` (their events, VM
	// tasks, then the jobs themselves) and of events of no job that
	// occurred before it. It returns the rows deleted: 0 when nothing of
	// that age is left.
	PruneHistory(ctx context.Context, before time.Time, limit int) (int, error)
	// WatchJobs delivers a notice for every change to a job committed by
	// any process (see JobNotice) until ctx ends, then closes the
	// channel; a catalog that sends notices of lines apart (PostgreSQL:
	// WatchJobLines, see LineNotice) leaves them out. Catalogs that cannot push changes (SQLite) return an error
	// wrapping errors.ErrUnsupported; their readers poll.
	WatchJobs(ctx context.Context) (<-chan JobNotice, error)

	CreateTasks(ctx context.Context, tasks []*Task) error // sets IDs; one transaction
	UpdateTasks(ctx context.Context, tasks []*Task) error // one transaction
	GetTask(ctx context.Context, id int64) (Task, error)
	ListTasks(ctx context.Context, f TaskFilter) ([]Task, error)
	// SupersedeTask settles, in one transaction, the task of VM
	// (connection, vmID) in job, a run that another carries on
	// (a leader's resumed run): a task not ended (queued, or running
	// with a unit that may still be on a worker) is ended cancelled with
	// msg, so that no unit of it can commit its point any more (a
	// worker's end of a unit wants it running: postgres.EndWorkerUnitTx);
	// a task that succeeded keeps its point, whose ID it returns ("": the
	// VM has no point of job). A unit committing at that moment waits
	// for the task's row lock, or this call for the unit's: one of the
	// two wins, never both.
	SupersedeTask(ctx context.Context, job int64, connection, vmID, msg string) (pointID string, err error)

	// AddEvents records events in one transaction, appending each to its
	// job's log: it sets every event's Seq (and a zero Time to now).
	AddEvents(ctx context.Context, events []Event) error
	ListEvents(ctx context.Context, f EventFilter) ([]Event, error)
	// JobLog pages through a job's log in order: the events with Seq
	// greater than after, at most limit of them (0: all).
	JobLog(ctx context.Context, jobID, after int64, limit int) ([]Event, error)

	PutBackupPoints(ctx context.Context, points []BackupPoint) error // upsert by (Repository, ID)
	DeleteBackupPoints(ctx context.Context, repository string, ids []string) error
	ListBackupPoints(ctx context.Context, f BackupPointFilter) ([]BackupPoint, error)
	// NewestBackupPoints returns the newest point of each of these VMs
	// (by Time, then ID, across repositories), once for a VM named
	// twice, none for a VM without points, in no particular order. It
	// reads a few index entries per VM, whatever the number of points in
	// the catalog.
	NewestBackupPoints(ctx context.Context, vms []VMRef) ([]BackupPoint, error)
	// NewestPointTimes returns the time of the newest point of every VM
	// that has one, in one grouped pass over the points: what judging a
	// whole fleet against its RPO needs, without an index lookup per VM.
	NewestPointTimes(ctx context.Context) (map[VMRef]time.Time, error)
	// NewestPolicyPointTimes returns the time of the newest point of
	// every VM (by connection and name) and policy that made points of
	// it (their "policy" tag, "" for points made by hand), in one
	// grouped pass over the points, in no particular order: the
	// metrics' last good backup of each VM by policy.
	NewestPolicyPointTimes(ctx context.Context) ([]PolicyPointTime, error)
	// ReplaceBackupPoints atomically replaces all points of a repository
	// (catalog rebuild from the repository).
	ReplaceBackupPoints(ctx context.Context, repository string, points []BackupPoint) error

	PutVMs(ctx context.Context, vms []VMRecord) error // upsert by (Connection, ID)
	ListVMs(ctx context.Context) ([]VMRecord, error)
	Inventory // each connection's VMs as refreshed last, paged (inventory.go)

	AccessStore // users, tokens, sessions, ACLs, audit log (access.go)
	Notifications
	ConfigObjects // objects of the configuration created through the API (configobjects.go)
	Leases        // several servers: who runs the schedules, each run claimed once (leases.go)
	MediaCatalog  // what is on which tape volume (media.go)
	Workers       // the fleet's worker registry (workers.go)
	WorkerEvents  // a worker's writes of an attempt, fenced by its epoch (workerevents.go)

	Close() error
}
