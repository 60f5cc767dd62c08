package api

import "time"

// FailoverInput runs an operation of a failover plan (test, failover,
// planned failover, failback) on its VMs, or on one of them.
type FailoverInput struct {
	WorkerParam
	Name string `path:"name" minLength:"1" maxLength:"255" example:"shop" doc:"the failover plan"`
	VM   string `query:"vm" maxLength:"255" doc:"only this VM of the plan (default: every VM, group by group)"`
	Seq  int    `query:"seq" minimum:"0" doc:"the standbys' restore point to start from, by sequence number (coffer replicas points); 0: the newest"`
}

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
	BackupPoint string `json:"backup_point"`
	PID         int    `json:"pid"`
	Resumed     bool   `json:"resumed,omitempty"`
}

// FailbackVM is what a failback wrote back onto one VM's disks.
type FailbackVM struct {
	VM           string `json:"vm"`
	Mode         string `json:"mode"`
	BytesRead    int64  `json:"bytes_read"`
	BytesWritten int64  `json:"bytes_written"`
}
