package catalog

import "time"

// Kinds of jobs. A job is one long operation of coffer, the control
// plane's task: a run of a policy, a restore, a maintenance operation.
// Jobs recorded before schema version 3 as "backup" read back as
// KindBackupPolicy.
const (
	KindBackupPolicy = "backup-policy" // a run of a policy: one VM task per selected VM
	KindBackupVM     = "backup-vm"
	KindBackupDisk   = "backup-disk" // a disk image
	KindRestore      = "restore"
	KindRestoreVM    = "restore-vm"
	KindRestoreFiles = "restore-files"
	KindVerify       = "verify"
	KindGC           = "gc"
	KindForget       = "forget"
	KindCopy         = "copy"
	KindInstant      = "instant"
	KindRepair       = "repair"
	KindVerifyBoot   = "verify-boot" // a backup point booted and checked (internal/bootverify)
	KindCleanup      = "cleanup"     // leftovers of crashed coffer processes removed at start
	KindMediaCopy    = "media-copy"  // backup points written to tape (internal/mediacopy)
	KindMediaRestore = "media-restore"
	KindMediaVerify  = "media-verify"
	// A measurement of this machine (internal/measure), its results in a
	// "bench-result" event: a device's throughput, coffer's pipeline.
	KindBenchDevice   = "bench-device"
	KindBenchPipeline = "bench-pipeline"
	KindInventory     = "inventory-refresh" // a connection's VMs listed into the catalog
	KindReplicate     = "replicate"         // a replication's standbys brought to their VMs' newest points
	KindFailover      = "failover"          // a failover plan's test, failover or failback (internal/failover)
)

// Job is one long operation: a run of a policy (with one Task per VM), or
// a restore, verify, gc... Its events are its log.
type Job struct {
	ID         int64
	Kind       string // one of the Kind* constants
	Policy     string
	Repository string
	Status     Status
	Worker     string // host/worker that ran it
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	TasksTotal int
	TasksOK    int
	TasksFail  int
	Error      string

	// Object is the access-control path the job acts on:
	// /policies/nightly, /repositories/main, /connections/kvm1/vm/web-1.
	Object string
	// VM is the VM a single-VM operation acts on; a policy run's VMs are
	// its tasks.
	VM string
	// User started the job, with Token when through an API token.
	User  string
	Token string
	// Progress is the newest sample the job's process recorded.
	Progress Progress
	// Owner is the process running the job, Heartbeat its last sign of
	// life: a job whose owner is gone is marked failed by the next
	// process that notices.
	Owner     Owner
	Heartbeat time.Time
	// CancelRequested is set by RequestCancel, from any process; the
	// owner polls it (or is notified) and stops. UpdateJob never changes
	// it.
	CancelRequested time.Time
	// LogLines counts the job's events: the Seq of the newest. Maintained
	// by AddEvents; CreateJob and UpdateJob ignore it.
	LogLines int64
}

// Progress of a running job. Rates and ETAs are the owner's estimates.
type Progress struct {
	BytesDone      int64
	BytesTotal     int64
	BytesPerSecond float64
	ETA            time.Duration // stored to the second; 0 when unknown
	ItemsDone      int64         // VMs, files, packs... of ItemsTotal
	ItemsTotal     int64
}

// Owner identifies the process that runs a job.
type Owner struct {
	Host string
	PID  int
	// Start is the process's start time in clock ticks since boot, so
	// that a reused PID is not taken for the owner.
	Start uint64
}

// JobFilter selects jobs; zero fields match everything. Jobs are listed
// newest first (CreatedAt, then ID); Limit 0 means no limit.
type JobFilter struct {
	Kind   string
	Policy string
	Status Status
	// Unfinished selects queued and running jobs.
	Unfinished bool
	// User and Object match exactly.
	User   string
	Object string
	// VM matches a single-VM job's VM, or a VM (name or ID) among a
	// policy run's tasks.
	VM string
	// Since and Until bound CreatedAt: Since <= CreatedAt < Until.
	Since time.Time
	Until time.Time
	// IDs restricts the list to these jobs; AboveID to jobs with a
	// larger ID.
	IDs     []int64
	AboveID int64
	// After continues a listing: only jobs that come after this one in
	// the order (keyset paging; stable while jobs are added).
	After JobCursor
	Limit int
}

// JobCursor is a position in the listing of jobs: the last job of a page.
type JobCursor struct {
	CreatedAt time.Time
	ID        int64
}

// Cursor is the position of j in the listing.
func (j Job) Cursor() JobCursor { return JobCursor{CreatedAt: j.CreatedAt, ID: j.ID} }

// JobNotice tells a watcher that a job changed in some process: What is
// "created", "updated", "log", "progress" or "cancel". A notice with
// JobID 0 ("resync") means notices may have been lost (the connection was
// re-established): anything may have changed. Notices of lines (log and
// progress, LineNotice) come apart where a catalog can send them apart
// (PostgreSQL's WatchJobLines): only subscribers want them.
type JobNotice struct {
	JobID int64
	What  string
}

// Notice kinds.
const (
	NoticeCreated  = "created"
	NoticeUpdated  = "updated"
	NoticeLog      = "log"
	NoticeProgress = "progress"
	NoticeCancel   = "cancel"
	NoticeResync   = "resync"
)

// LineNotice reports whether notices of kind what tell of a job's lines:
// its log, or its progress. Only a process whose subscribers follow the
// job wants them; the job's own process publishes its own, and a cancel
// request has a notice of its own.
func LineNotice(what string) bool { return what == NoticeLog || what == NoticeProgress }
