package catalog

import (
	"context"
	"time"
)

// Replica is a standby a replication keeps: where, as of which source
// instant, and its restore points as the standby's record lists them
// (internal/replica's State, as JSON; the catalog does not read it).
type Replica struct {
	Replication  string
	VM           string
	Host         string // the worker's host that keeps it ("" in-process)
	Directory    string
	SourceTime   time.Time // the newest point's backup instant
	ReplicatedAt time.Time // when that point was committed
	Points       string    // JSON
	// LastError is the last run's failure ("" when it succeeded); the
	// points stay what the last good run left.
	LastError string
}

// Replicas keeps the standbys' state. It is apart from Catalog: the SQL
// catalogs keep it; a face without it shows no replicas.
type Replicas interface {
	// PutReplica records a run: a good one's state, or a failure
	// (LastError set), which keeps the points of the last good run (a
	// VM with no standby yet is listed with no point and the error).
	PutReplica(ctx context.Context, r Replica) error
	// ListReplicas lists the standbys ("" replication: all), by
	// replication and VM.
	ListReplicas(ctx context.Context, replication string) ([]Replica, error)
}

// ReplicasOf is c's standby state, looking through wrappers; false when
// c keeps none.
func ReplicasOf(c Catalog) (Replicas, bool) { return as[Replicas](c) }
