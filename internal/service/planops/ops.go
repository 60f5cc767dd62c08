// Package planops holds the policies checked and previewed, and the planner: a policy run predicted with its what-ifs, its capacity forecast, and the record of the predictions against what happened.
//
// Its operations are methods of Ops, the kernel's service (package
// service: opening repositories, tasks, the configuration in effect) seen
// from this domain, and its table (operations.go) binds each to its ID,
// route and access rules. It imports no other domain: an operation that
// needs another's calls it by ID (Service.Invoke).
package planops

import "github.com/coffer-backup/coffer/internal/service"

// Ops runs this domain's operations on a service.
type Ops struct{ *service.Service }
