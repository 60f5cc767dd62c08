package api

import "time"

// Replica is a standby a replication keeps on a DR host: where, how far
// behind its VM's newest state it is, and its restore points.
type Replica struct {
	Replication string `json:"replication"`
	VM          string `json:"vm"`
	// Host is the worker's host that keeps it ("" when the server does).
	Host      string `json:"host"`
	Directory string `json:"directory"`
	// SourceTime is the instant of the backup point the newest restore
	// point equals (zero: no point yet); LagSeconds how long before now
	// that is, the data a failover now would lose (RPO).
	SourceTime   time.Time `json:"source_time,omitzero"`
	ReplicatedAt time.Time `json:"replicated_at,omitzero"`
	LagSeconds   float64   `json:"lag_seconds"`
	// RPOSeconds is the replication's objective; Lagging says LagSeconds
	// is beyond it (or that the standby has no point).
	RPOSeconds float64        `json:"rpo_seconds"`
	Lagging    bool           `json:"lagging"`
	Points     []ReplicaPoint `json:"points"`
	// LastError is the last run's failure ("" when it succeeded).
	LastError string `json:"last_error,omitempty"`
}

// ReplicaPoint is a restore point of a standby, oldest first: failover
// may start the standby from any of them.
type ReplicaPoint struct {
	Seq          int       `json:"seq"`
	BackupPoint  string    `json:"point_id"`
	SourceTime   time.Time `json:"source_time"`
	ReplicatedAt time.Time `json:"replicated_at"`
	BytesRead    int64     `json:"read_bytes"`
	BytesWritten int64     `json:"written_bytes"`
}

// ReplicationRun is what a run of a replication did, VM by VM.
type ReplicationRun struct {
	Replication string `json:"replication"`
	// Host is where it ran: the DR host's worker, or the server's host.
	Host string             `json:"host"`
	VMs  []ReplicationRunVM `json:"vms"`
}

// ReplicationRunVM is one VM's standby brought to its newest backup point.
type ReplicationRunVM struct {
	VM          string    `json:"vm"`
	Directory   string    `json:"directory"`
	BackupPoint string    `json:"point_id,omitempty"`
	SourceTime  time.Time `json:"source_time,omitzero"`
	// UpToDate says the standby already equalled the newest point.
	UpToDate bool `json:"up_to_date"`
	// Spans are the disk spans written: those that changed.
	Spans        int            `json:"spans"`
	BytesRead    int64          `json:"read_bytes"`
	BytesWritten int64          `json:"written_bytes"`
	Points       []ReplicaPoint `json:"points"`
	Error        string         `json:"error,omitempty"`
}
