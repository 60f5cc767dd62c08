package fleetops

import (
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/service"
)

// Operations are this domain's rows of the operation table.
var Operations = []service.Operation{
	{ID: "list-vms", Method: "VMs", Summary: "a page of the VMs of every connection (the inventory the server refreshes) and what protects them",
		HTTP: service.Get, Path: "/vms", Requires: service.Lists(auth.ConnAudit, service.OnConns), Endpoint: service.Answers(Ops.VMs)},
	{ID: "protection-summary", Method: "ProtectionSummary", Summary: "how many VMs are within their RPO, outside it, without a point, selected by no policy (the dashboard's counts)",
		HTTP: service.Get, Path: "/vms/protection", Requires: service.Lists(auth.ConnAudit, service.OnConns),
		Endpoint: service.Returns(Ops.ProtectionSummary)},
	{ID: "refresh-inventory", Method: "RefreshInventory", Summary: "list a connection's VMs into the inventory now (a task)", HTTP: service.Post,
		Path: "/connections/{conn}/inventory/refresh", Requires: service.Require(auth.ConnAudit, service.OnConns+"/{conn}"),
		Endpoint: service.Returns(Ops.RefreshInventory)},
	{ID: service.ConnectionVMsOperation, Method: "ConnectionVMs", Summary: "list a connection's VMs live, in full, on the worker it is handed to",
		Internal: "a server hands it to a worker that reaches the connection (the fleet's stand-in for the connection): a request reads the inventory (list-vms)",
		Endpoint: service.Returns(Ops.ConnectionVMs)},
}
