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
}
