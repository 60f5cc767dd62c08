package api

import "time"

// Job is one run recorded in the catalog: a policy's backup run (`coffer
// run`, the server's schedules), a skipped scheduled run, or a cleanup of
// leftovers. Listings leave Tasks and Events out; `coffer job show` and a
// finished run carry them.
type Job struct {
	ID              int64     `json:"id"`
	Kind            string    `json:"kind"`
	Policy          string    `json:"policy,omitempty"`
	Repository      string    `json:"repository,omitempty"`
	Status          string    `json:"status"` // running, success, partial, failed, cancelled
	Worker          string    `json:"worker,omitempty"`
	Started         time.Time `json:"started"`
	Finished        time.Time `json:"finished,omitzero"`
	DurationSeconds float64   `json:"duration_seconds"`
	TasksTotal      int       `json:"tasks_total"`
	TasksOK         int       `json:"tasks_ok"`
	TasksFailed     int       `json:"tasks_failed"`
	Error           string    `json:"error,omitempty"`
	// What the job acts on, who started it (and with which token), its
	// progress, the process running it, and a cancel request.
	Object          string        `json:"object,omitempty"`
	VM              string        `json:"vm,omitempty"`
	User            string        `json:"user,omitempty"`
	Token           string        `json:"token,omitempty"`
	Progress        *TaskProgress `json:"progress,omitempty"`
	OwnerHost       string        `json:"owner_host,omitempty"`
	OwnerPID        int           `json:"owner_pid,omitempty"`
	Heartbeat       time.Time     `json:"heartbeat,omitzero"`
	CancelRequested time.Time     `json:"cancel_requested,omitzero"`
	LogLines        int64         `json:"log_lines"`
	Tasks           []VMTask      `json:"tasks,omitempty"`
	Events          []Event       `json:"events,omitempty"`
}

// TaskProgress is how far a running job got.
type TaskProgress struct {
	DoneBytes          int64   `json:"done_bytes"`
	TotalBytes         int64   `json:"total_bytes"`
	RateBytesPerSecond float64 `json:"rate_bytes_per_second"`
	ETASeconds         float64 `json:"eta_seconds"`
	ItemsDone          int64   `json:"items_done"`
	ItemsTotal         int64   `json:"items_total"`
}

// VMTask is the work of a job on one VM.
type VMTask struct {
	ID         int64    `json:"id"`
	Connection string   `json:"connection"`
	VM         string   `json:"vm"`
	VMID       string   `json:"vm_id"`
	Host       string   `json:"host,omitempty"`
	Datastores []string `json:"datastores"`
	Status     string   `json:"status"`
	Mode       string   `json:"mode"`
	// SnapshotMode is the VM snapshot mode asked for; SnapshotModeAchieved
	// that of the task's point (absent while it has none, "unknown" for a
	// point recorded before coffer kept it).
	SnapshotMode         string    `json:"snapshot_mode"`
	SnapshotModeAchieved string    `json:"snapshot_mode_achieved,omitempty"`
	Attempts             int       `json:"attempts"`
	Started              time.Time `json:"started,omitzero"`
	Finished             time.Time `json:"finished,omitzero"`
	DurationSeconds      float64   `json:"duration_seconds"`
	LogicalBytes         int64     `json:"logical_bytes"`
	ReadBytes            int64     `json:"read_bytes"`
	StoredBytes          int64     `json:"stored_bytes"`
	PointID              string    `json:"point_id,omitempty"`
	Warnings             []string  `json:"warnings"`
	Error                string    `json:"error,omitempty"`
}

// Event is a timestamped record of a job or one of its tasks: a line of
// the job's log, numbered from 1 in the order recorded.
type Event struct {
	Seq     int64          `json:"seq"`
	Time    time.Time      `json:"time"`
	TaskID  int64          `json:"task_id,omitempty"`
	Level   string         `json:"level"`
	Kind    string         `json:"kind"`
	Message string         `json:"message"`
	Fields  map[string]any `json:"fields,omitempty"`
}

// JobEvent is what following a job brings (server-sent events): its
// state when it starts, changes and ends (status), a progress sample
// (progress), both with Job, or a line of its log (log, with Line).
type JobEvent struct {
	Type  string `json:"type" enum:"status,progress,log"`
	JobID int64  `json:"job_id"`
	Job   *Job   `json:"job,omitempty"`
	Line  *Event `json:"line,omitempty"`
}

// JobProgress is a running job's state, for live displays.
type JobProgress struct {
	JobID          int64        `json:"job_id"`
	Policy         string       `json:"policy"`
	ElapsedSeconds float64      `json:"elapsed_seconds"`
	VMs            int          `json:"vms"`
	Done           int          `json:"done"`
	Failed         int          `json:"failed"`
	Running        int          `json:"running"`
	TotalBytes     int64        `json:"total_bytes"` // estimated from provisioned sizes
	DoneBytes      int64        `json:"done_bytes"`
	ETASeconds     float64      `json:"eta_seconds,omitempty"`
	RunningVMs     []VMProgress `json:"running_vms"`
}

// VMProgress is one VM being backed up.
type VMProgress struct {
	VM             string  `json:"vm"`
	Attempt        int     `json:"attempt"`
	DoneBytes      int64   `json:"done_bytes"`
	TotalBytes     int64   `json:"total_bytes"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
}
