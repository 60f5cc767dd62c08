// Package replicaops runs the replications (internal/replica): a run
// brings each standby of a replication to its VM's newest backup point, on
// the worker of the DR host (or in this process without a fleet), and the
// listing shows every standby with its restore points and its lag.
//
// Its operations are methods of Ops, the kernel's service (package
// service) seen from this domain, and its table (operations.go) binds
// each to its ID, route and access rules. It imports no other domain.
package replicaops

import (
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/service"
)

// Ops runs this domain's operations on a service.
type Ops struct{ *service.Service }

// onReplications is the ACL object of the replications: the system's,
// as their configuration objects are (configops).
const onReplications = auth.SystemPath + "/replications"

// Operations are this domain's rows of the operation table.
var Operations = []service.Operation{
	{ID: "list-replicas", Method: "Replicas", Summary: "list the standbys replications keep on DR hosts: each one's restore points and its lag behind its VM (RPO)",
		HTTP: service.Get, Path: "/replicas", Requires: service.Require(auth.SysAudit, onReplications),
		Endpoint: service.Returns(Ops.Replicas)},
	{ID: "run-replication", Method: "RunReplication", Summary: "bring a replication's standbys to their VMs' newest backup points, on the DR host's worker",
		HTTP: service.Post, Path: "/replications/{name}/run", Requires: service.Require(auth.SysModify, onReplications+"/{name}"),
		Endpoint: service.Returns(Ops.RunReplication)},
	{ID: "test-failover", Method: "TestFailover", Summary: "test a failover plan: start its VMs on throw-away overlays of their standbys, isolated, group by group, probe them, discard everything",
		HTTP: service.Post, Path: "/failover-plans/{name}/test", Requires: service.Require(auth.SysFailover, onFailoverPlans+"/{name}"),
		Endpoint: service.Returns(Ops.TestFailover)},
	{ID: "failover", Method: "Failover", Summary: "fail over a plan's VMs: their standbys become the running VMs, from the newest restore point or a chosen one, group by group",
		HTTP: service.Post, Path: "/failover-plans/{name}/failover", Requires: service.Require(auth.SysFailover, onFailoverPlans+"/{name}"),
		Endpoint: service.Returns(Ops.Failover)},
	{ID: "planned-failover", Method: "PlannedFailover", Summary: "planned failover: replicate the VMs' final backup points (sources shut down), then fail over onto exactly them",
		HTTP: service.Post, Path: "/failover-plans/{name}/planned", Requires: service.Require(auth.SysFailover, onFailoverPlans+"/{name}"),
		Endpoint: service.Returns(Ops.PlannedFailover)},
	{ID: "failback", Method: "Failback", Summary: "fail back a plan's failed-over VMs: write what changed at the DR site onto the original disks, then clear the failover",
		HTTP: service.Post, Path: "/failover-plans/{name}/failback", Requires: service.Require(auth.SysFailover, onFailoverPlans+"/{name}"),
		Endpoint: service.Returns(Ops.Failback)},
	{ID: "failover-plan-runs", Method: "FailoverPlanRuns", Summary: "a failover plan's newest runs with each step's time and each probe's result, its standbys' state, and whether the caller may run it",
		HTTP: service.Get, Path: "/failover-plans/{name}/runs", Requires: service.Require(auth.SysAudit, onFailoverPlans+"/{name}"),
		Endpoint: service.Returns(Ops.FailoverPlanRuns)},
}
