package workerops

import (
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/fleet"
	"github.com/coffer-backup/coffer/internal/service"
)

// onWorkers is the ACL object of the fleet's workers: the system itself,
// as for the metrics, whose per-worker gauges show the same (an Auditor
// on /system, propagated or not, sees both).
const onWorkers = auth.SystemPath

// Operations are this domain's rows of the operation table.
var Operations = []service.Operation{
	{ID: "list-workers", Method: "Workers", Summary: "list the fleet's workers: their reach, slots, state, version and last heartbeat",
		HTTP: service.Get, Path: "/workers", Requires: service.Require(auth.SysAudit, onWorkers),
		Endpoint: service.Returns(Ops.Workers)},
	{ID: "drain-worker", Method: "DrainWorker", Summary: "drain a worker: it takes no new work and stops once its running work has finished",
		HTTP: service.Post, Path: "/workers/{worker}/drain", Requires: service.Require(auth.SysModify, onWorkers),
		Endpoint: service.Returns(Ops.DrainWorker)},
	{ID: "create-worker-token", Method: "CreateWorkerToken", Summary: "create a worker's own credential to the catalog (its token is shown this once), or replace it",
		HTTP: service.Post, Path: "/workers/{worker}/token", Requires: onlyAdmins,
		NoConsole: "a worker's credential, made when the worker is installed: its secret goes onto the worker's host (`coffer workers token create`), not into a browser",
		Endpoint:  service.Creates(Ops.CreateWorkerToken)},
	{ID: "revoke-worker-token", Method: "RevokeWorkerToken", Summary: "revoke a worker's credential: it is cut off from the catalog and its running units are re-admitted",
		HTTP: service.Delete, Path: "/workers/{worker}/token", Requires: onlyAdmins,
		Endpoint: service.Returns(Ops.RevokeWorkerToken)},
	{ID: fleet.RemoveLostOwnersOperation, Method: "RemoveLostOwners", Summary: "remove the snapshots lost workers left on a connection's VMs, and resume the VMs they suspended",
		Internal: "the leader hands it to a worker reaching the connection when it declares workers lost (fleet.CleanupAfterLost)",
		Endpoint: service.Returns(Ops.RemoveLostOwners)},
}

// onlyAdmins are the requirements of a worker's credential: what may
// change the system (Sys.Modify on /system, as a drain) and grant access
// (Perm.Modify on /access, as an API token for another user), since a
// worker token reaches the catalog's database. The Admin role holds both.
var onlyAdmins = []service.Requirement{
	{Privilege: auth.SysModify, Object: onWorkers},
	{Privilege: auth.PermModify, Object: auth.AccessPath},
}
