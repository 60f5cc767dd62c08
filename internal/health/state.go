// Package health watches over what coffer protects, on a schedule: from
// the catalog, every VM's newest good point against its policy's RPO,
// the tasks running, the last good verify and gc of each repository;
// from each repository's statistics, its size, dedup ratio, damage and
// how full it is; from its manifests, the object locks about to end. It
// sets the metrics (internal/metrics) and tells the notification targets
// (rpo-missed, repository-full, lock-lapsing) once per occurrence. Every
// server sharing a catalog keeps its metrics; only the one running the
// schedules notifies.
package health

import (
	"context"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/metrics"
	"github.com/coffer-backup/coffer/internal/policy"
)

// Miss is a VM without a good point within its policy's RPO.
type Miss struct {
	Policy, Connection, VM string
	RPO                    time.Duration
	LastPoint              string    // "" when it has none
	LastTime               time.Time // zero when it has none
}

// readState reads the catalog's view of protection at now: the metrics'
// state and the VMs outside their RPO. It is a handful of indexed queries
// per policy and repository, and one listing of the backup points.
func readState(ctx context.Context, cat catalog.Catalog, cfg *policy.Config, repositories []string, now time.Time) (metrics.State, []Miss, error) {
	st := metrics.State{At: now, PolicyLast: map[string]time.Time{}, Running: map[string]int{}, VerifyLast: map[string]time.Time{},
		GCLast: map[string]time.Time{}, RPO: map[string]time.Duration{}, OutsideRPO: map[string]int{}}
	points, err := cat.ListBackupPoints(ctx, catalog.BackupPointFilter{})
	if err != nil {
		return st, nil, fmt.Errorf("health: list backup points: %w", err)
	}
	type vmKey struct{ conn, vm, policy string }
	newest := map[vmKey]catalog.BackupPoint{}
	for _, p := range points { // newest first: the first of each key wins
		k := vmKey{p.Connection, p.VMName, p.Tags["policy"]}
		if _, ok := newest[k]; !ok {
			newest[k] = p
		}
	}
	for k, p := range newest {
		st.Backups = append(st.Backups, metrics.VMBackup{Connection: k.conn, VM: k.vm, Policy: k.policy, At: p.Time})
	}
	running, err := cat.ListJobs(ctx, catalog.JobFilter{Unfinished: true})
	if err != nil {
		return st, nil, fmt.Errorf("health: list running tasks: %w", err)
	}
	for _, j := range running {
		st.Running[j.Kind]++
	}
	for _, r := range repositories {
		for kind, into := range map[string]map[string]time.Time{catalog.KindVerify: st.VerifyLast, catalog.KindGC: st.GCLast} {
			js, err := cat.ListJobs(ctx, catalog.JobFilter{Kind: kind, Object: "/repositories/" + r, Status: catalog.StatusSuccess, Limit: 1})
			if err != nil {
				return st, nil, fmt.Errorf("health: last %s of %s: %w", kind, r, err)
			}
			if len(js) > 0 {
				into[r] = js[0].FinishedAt
			}
		}
	}
	var misses []Miss
	for _, p := range cfg.Policies {
		last, err := cat.ListJobs(ctx, catalog.JobFilter{Kind: catalog.KindBackupPolicy, Policy: p.Name, Status: catalog.StatusSuccess, Limit: 1})
		if err != nil {
			return st, nil, fmt.Errorf("health: last run of policy %s: %w", p.Name, err)
		}
		if len(last) > 0 {
			st.PolicyLast[p.Name] = last[0].FinishedAt
		}
		if p.RPO <= 0 {
			continue
		}
		rpo := time.Duration(p.RPO)
		st.RPO[p.Name] = rpo
		ms, err := policyMisses(ctx, cat, p.Name, rpo, func(conn, vm string) (catalog.BackupPoint, bool) {
			pt, ok := newest[vmKey{conn, vm, p.Name}]
			return pt, ok
		}, now)
		if err != nil {
			return st, nil, err
		}
		st.OutsideRPO[p.Name] = len(ms)
		misses = append(misses, ms...)
	}
	return st, misses, nil
}

// policyMisses finds the VMs of a policy outside its RPO. The policy's
// VMs are those its newest run selected (its VM tasks); a VM without a
// point is outside once that run is older than the RPO.
func policyMisses(ctx context.Context, cat catalog.Catalog, name string, rpo time.Duration,
	newest func(conn, vm string) (catalog.BackupPoint, bool), now time.Time) ([]Miss, error) {
	jobs, err := cat.ListJobs(ctx, catalog.JobFilter{Kind: catalog.KindBackupPolicy, Policy: name, Limit: 10})
	if err != nil {
		return nil, fmt.Errorf("health: runs of policy %s: %w", name, err)
	}
	for _, j := range jobs {
		tasks, err := cat.ListTasks(ctx, catalog.TaskFilter{JobID: j.ID})
		if err != nil {
			return nil, fmt.Errorf("health: VMs of job %d: %w", j.ID, err)
		}
		if len(tasks) == 0 {
			continue // a skipped run, or one that selected nothing
		}
		var out []Miss
		seen := map[string]bool{}
		for _, t := range tasks {
			if seen[t.Connection+"/"+t.VMName] {
				continue
			}
			seen[t.Connection+"/"+t.VMName] = true
			m := Miss{Policy: name, Connection: t.Connection, VM: t.VMName, RPO: rpo}
			pt, ok := newest(t.Connection, t.VMName)
			switch {
			case ok && now.Sub(pt.Time) <= rpo:
				continue
			case ok:
				m.LastPoint, m.LastTime = pt.ID, pt.Time
			case now.Sub(j.CreatedAt) <= rpo:
				continue // never backed up, but selected too recently to miss
			}
			out = append(out, m)
		}
		return out, nil
	}
	return nil, nil
}
