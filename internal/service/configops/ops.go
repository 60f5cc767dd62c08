// Package configops holds the configuration objects (policies, connections, repositories, notification targets and matchers, media libraries, limits, latency-control entries, resource groups, storage snapshot providers) listed, created, changed and deleted through the API, the configuration in effect, and notification tests.
//
// Its operations are methods of Ops, the kernel's service (package
// service: opening repositories, tasks, the configuration in effect) seen
// from this domain, and its table (operations.go) binds each to its ID,
// route and access rules. It imports no other domain: an operation that
// needs another's calls it by ID (Service.Invoke).
package configops

import "github.com/coffer-backup/coffer/internal/service"

// Ops runs this domain's operations on a service.
type Ops struct{ *service.Service }
