package replicaops

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/policy"
)

// Replicas lists the standbys the catalog records, by replication and
// VM, each with its lag behind now: a catalog that keeps none (a face
// without one) lists none.
func (s Ops) Replicas(ctx context.Context, in *api.ListReplicasInput) ([]api.Replica, error) {
	out := []api.Replica{}
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cat.Close() }() // a read
	rs, ok := catalog.ReplicasOf(cat)
	if !ok {
		return out, nil
	}
	rows, err := rs.ListReplicas(ctx, in.Replication)
	if err != nil {
		return nil, err
	}
	cfg, err := s.EngineConfig(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	for _, row := range rows {
		if in.VM != "" && row.VM != in.VM {
			continue
		}
		repl, _ := cfg.Replication(row.Replication)
		out = append(out, Doc(row, repl.RPOOrDefault(), now))
	}
	return out, nil
}

// Doc is a catalog row as the API shows it, its lag taken at now.
func Doc(row catalog.Replica, rpo time.Duration, now time.Time) api.Replica {
	d := api.Replica{Replication: row.Replication, VM: row.VM, Host: row.Host, Directory: row.Directory, SourceTime: row.SourceTime,
		ReplicatedAt: row.ReplicatedAt, RPOSeconds: rpo.Seconds(), LastError: row.LastError, Points: []api.ReplicaPoint{}}
	_ = json.Unmarshal([]byte(row.Points), &d.Points) // written by record below; "[]" for none
	if !row.SourceTime.IsZero() {
		d.LagSeconds = now.Sub(row.SourceTime).Seconds()
	}
	d.Lagging = row.SourceTime.IsZero() || d.LagSeconds > d.RPOSeconds
	return d
}

// record writes what a run did to the catalog, VM by VM (a failed VM's
// error, keeping its points), and returns runErr: the run's outcome is
// the operation's, whether the catalog took it or not (a failure to
// record is joined to it).
func (s Ops) record(ctx context.Context, repl policy.Replication, run *api.ReplicationRun, runErr error) error {
	if run == nil {
		return runErr
	}
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		return joinErr(runErr, err)
	}
	defer func() { _ = cat.Close() }() // its writes committed each on its own
	rs, ok := catalog.ReplicasOf(cat)
	if !ok {
		return runErr
	}
	for _, vm := range run.VMs {
		row := catalog.Replica{Replication: repl.Name, VM: vm.VM, Host: run.Host, Directory: vm.Directory, LastError: vm.Error, Points: "[]"}
		if len(vm.Points) > 0 {
			newest := vm.Points[len(vm.Points)-1]
			row.SourceTime, row.ReplicatedAt = newest.SourceTime, newest.ReplicatedAt
			b, _ := json.Marshal(vm.Points) // plain structs
			row.Points = string(b)
		}
		if err := rs.PutReplica(ctx, row); err != nil {
			runErr = joinErr(runErr, err)
		}
	}
	return runErr
}

func joinErr(a, b error) error {
	if a == nil {
		return b
	}
	return fmt.Errorf("%w (and recording the standbys failed: %v)", a, b)
}
