package api

import "time"

// FailoverRun is what an operation of a failover plan did.
type FailoverRun struct {
	Plan string `json:"plan"`
	// Kind is test, failover, planned or failback.
	Kind     string          `json:"kind"`
	Host     string          `json:"host"`
	Started  time.Time       `json:"started"`
	Seconds  float64         `json:"seconds"`
	Passed   bool            `json:"passed"`
	Steps    []FailoverStep  `json:"steps"`
	Probes   []FailoverProbe `json:"probes"`
	VMs      []FailoverVM    `json:"vms"`
	Failback []FailbackVM    `json:"failback"`
}

// FailoverStep is one timed step.
type FailoverStep struct {
	Group   int     `json:"group"`
	VM      string  `json:"vm,omitempty"`
	Name    string  `json:"name"`
	Seconds float64 `json:"seconds"`
	Error   string  `json:"error,omitempty"`
	Detail  string  `json:"detail,omitempty"`
}

// FailoverProbe is one probe of one VM.
type FailoverProbe struct {
	Group    int     `json:"group"`
	VM       string  `json:"vm"`
	Probe    string  `json:"probe"`
	Passed   bool    `json:"passed"`
	Evidence string  `json:"evidence,omitempty"`
	Error    string  `json:"error,omitempty"`
	Seconds  float64 `json:"seconds"`
}

// FailoverVM is a standby a failover made the running VM.
type FailoverVM struct {
	VM          string `json:"vm"`
	Seq         int    `json:"seq"`
	BackupPoint string `json:"point_id"`
	PID         int    `json:"pid"`
	Resumed     bool   `json:"resumed,omitempty"`
}

// FailbackVM is what a failback wrote back onto one VM's disks.
type FailbackVM struct {
	VM           string `json:"vm"`
	Mode         string `json:"mode"`
	BytesRead    int64  `json:"read_bytes"`
	BytesWritten int64  `json:"written_bytes"`
	// Disks are the new disk files of a failback to a new location, by
	// disk key.
	Disks map[string]string `json:"disks,omitempty"`
}

// FailoverPlanRuns is a failover plan's recent runs, the state of its
// standbys, and whether the caller may run it.
type FailoverPlanRuns struct {
	Plan        string `json:"plan"`
	Replication string `json:"replication"`
	// MayRun: the caller holds Sys.Failover on the plan, so may start
	// its test failover, failover, planned failover and failback.
	MayRun   bool              `json:"may_run"`
	Standbys []FailoverStandby `json:"standbys"`
	// Runs are the newest first, each a job of kind failover.
	Runs []FailoverRunRecord `json:"runs"`
}

// FailoverStandby is a VM of a plan and whether its standby is failed
// over now.
type FailoverStandby struct {
	VM         string    `json:"vm"`
	Group      int       `json:"group"`
	FailedOver bool      `json:"failed_over"`
	Seq        int       `json:"seq,omitempty" doc:"the restore point it was failed over from"`
	Since      time.Time `json:"since,omitzero"`
	Planned    bool      `json:"planned,omitempty"`
	// Unknown says why the standby's record could not be read here (on
	// a DR worker's host, say).
	Unknown string `json:"unknown,omitempty"`
}

// FailoverRunRecord is one run of a plan as its job's log recorded it:
// each step and probe is an event of the job.
type FailoverRunRecord struct {
	JobID   int64           `json:"job_id"`
	Kind    string          `json:"kind"`
	Status  string          `json:"status"`
	User    string          `json:"user,omitempty"`
	Started time.Time       `json:"started,omitzero"`
	Seconds float64         `json:"seconds"`
	Error   string          `json:"error,omitempty"`
	Steps   []FailoverStep  `json:"steps"`
	Probes  []FailoverProbe `json:"probes"`
}
