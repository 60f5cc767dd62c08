// Package health watches over what coffer protects, on a schedule: from
// the catalog, every VM of the inventory against its RPO, the newest
// point of each VM by policy, the tasks running, the last good verify
// and gc of each repository; from each repository's statistics, its
// size, dedup ratio, damage and how full it is; from its manifests, the
// object locks about to end. It sets the metrics (internal/metrics) and
// tells the notification targets (rpo-missed, repository-full,
// lock-lapsing) once per occurrence. Every server sharing a catalog keeps
// its metrics; only the one running the schedules notifies.
package health

import (
	"context"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/metrics"
	"github.com/coffer-backup/coffer/internal/policy"
)

// Judge judges the fleet of cfg's connections against its RPOs at now.
// internal/service supplies it: the rule of the console's protection
// summary, so that the metrics, the notifications and the console never
// disagree on which VM is outside its RPO.
type Judge func(ctx context.Context, cfg *policy.Config, now time.Time) (Protection, error)

// Protection is the fleet judged against its RPOs.
type Protection struct {
	// VMs counts the inventory's VMs by how they stand: no-policy,
	// no-point, outside-rpo, within-rpo (every one, zero included).
	VMs map[string]int
	// OutsideByPolicy counts, for every policy, the VMs it selects that
	// are outside their RPO.
	OutsideByPolicy map[string]int
	// Outside are the VMs outside their RPO.
	Outside []Miss
}

// Miss is a VM whose newest point is older than its RPO.
type Miss struct {
	// Policy is the one whose RPO the VM is held to: the strictest of
	// the policies selecting it, the first of them when none sets one.
	Policy         string
	Connection, VM string
	VMID           string
	RPO            time.Duration
	LastTime       time.Time // its newest point's
	LastPoint      string    // that point's ID, looked up for a notification
}

// readState reads the catalog's view of protection at now: the metrics'
// state and the VMs outside their RPO. It reads aggregates, never every
// point: the newest point's time per VM and policy in one grouped query,
// judge's (the inventory and the newest point's time per VM), and a
// handful of indexed queries per policy and repository.
func readState(ctx context.Context, cat catalog.Catalog, cfg *policy.Config, repositories []string, judge Judge,
	now time.Time) (metrics.State, []Miss, error) {
	st := metrics.State{At: now, PolicyLast: map[string]time.Time{}, Running: map[string]int{}, VerifyLast: map[string]time.Time{},
		GCLast: map[string]time.Time{}, RPO: map[string]time.Duration{}, OutsideRPO: map[string]int{}, VMs: map[string]int{}}
	newest, err := cat.NewestPolicyPointTimes(ctx)
	if err != nil {
		return st, nil, fmt.Errorf("health: newest points: %w", err)
	}
	for _, p := range newest {
		st.Backups = append(st.Backups, metrics.VMBackup{Connection: p.Connection, VM: p.VMName, Policy: p.Policy, At: p.Time})
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
	for _, p := range cfg.Policies {
		last, err := cat.ListJobs(ctx, catalog.JobFilter{Kind: catalog.KindBackupPolicy, Policy: p.Name, Status: catalog.StatusSuccess, Limit: 1})
		if err != nil {
			return st, nil, fmt.Errorf("health: last run of policy %s: %w", p.Name, err)
		}
		if len(last) > 0 {
			st.PolicyLast[p.Name] = last[0].FinishedAt
		}
		if p.RPO > 0 {
			st.RPO[p.Name] = time.Duration(p.RPO)
		}
	}
	if st.Replicas, err = replicaState(ctx, cat, cfg); err != nil {
		return st, nil, err
	}
	if st.NotificationsPending, st.NotificationsFailed, err = deliveryCounts(ctx, cat, now); err != nil {
		return st, nil, err
	}
	if judge == nil {
		return st, nil, nil
	}
	prot, err := judge(ctx, cfg, now)
	if err != nil {
		return st, nil, fmt.Errorf("health: judge the fleet against its RPOs: %w", err)
	}
	st.VMs, st.OutsideRPO = prot.VMs, prot.OutsideByPolicy
	return st, prot.Outside, nil
}

// countedDeliveries bounds the deliveries read to count a backlog: past
// it the gauge says "at least", and the alert has long fired.
const countedDeliveries = 10000

// deliveryCounts counts, by target, the notification deliveries pending
// and those given up in the last 24 hours.
func deliveryCounts(ctx context.Context, cat catalog.Notifications, now time.Time) (pending, failed map[string]int, err error) {
	count := func(f catalog.DeliveryFilter) (map[string]int, error) {
		f.Limit = countedDeliveries
		ds, err := cat.ListDeliveries(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("health: %s notification deliveries: %w", f.Status, err)
		}
		by := map[string]int{}
		for _, d := range ds {
			by[d.Target]++
		}
		return by, nil
	}
	if pending, err = count(catalog.DeliveryFilter{Status: catalog.DeliveryPending}); err != nil {
		return nil, nil, err
	}
	failed, err = count(catalog.DeliveryFilter{Status: catalog.DeliveryFailed, Since: now.Add(-24 * time.Hour)})
	return pending, failed, err
}

// replicaState is every standby the catalog records, with its
// replication's RPO (a replication no longer configured keeps the
// default's, until its rows go).
func replicaState(ctx context.Context, cat catalog.Catalog, cfg *policy.Config) ([]metrics.Replica, error) {
	rs, ok := catalog.ReplicasOf(cat)
	if !ok {
		return nil, nil
	}
	rows, err := rs.ListReplicas(ctx, "")
	if err != nil {
		return nil, fmt.Errorf("health: replicas: %w", err)
	}
	out := make([]metrics.Replica, 0, len(rows))
	for _, r := range rows {
		repl, _ := cfg.Replication(r.Replication)
		out = append(out, metrics.Replica{Replication: r.Replication, VM: r.VM, SourceTime: r.SourceTime, RPO: repl.RPOOrDefault()})
	}
	return out, nil
}
