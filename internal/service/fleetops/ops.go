// Package fleetops holds the VMs of every connection: the inventory and its refresh, what protects each VM and how well (RPO, the dashboard's counts, the health monitor), and the server's schedules that run the policies and the maintenance jobs over them.
//
// Its operations are methods of Ops, the kernel's service (package
// service: opening repositories, tasks, the configuration in effect) seen
// from this domain, and its table (operations.go) binds each to its ID,
// route and access rules. It imports no other domain: an operation that
// needs another's calls it by ID (Service.Invoke).
package fleetops

import "github.com/coffer-backup/coffer/internal/service"

// Ops runs this domain's operations on a service.
type Ops struct{ *service.Service }
