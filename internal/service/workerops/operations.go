package workerops

import (
	"github.com/coffer-backup/coffer/internal/auth"
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
}
