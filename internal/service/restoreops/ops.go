// Package restoreops holds reading backup points back: restores of disks and of whole VMs, the file browser and downloads, instant recovery and NBD exports, boot verification, and the storage snapshots policies keep as restore points.
//
// Its operations are methods of Ops, the kernel's service (package
// service: opening repositories, tasks, the configuration in effect) seen
// from this domain, and its table (operations.go) binds each to its ID,
// route and access rules. It imports no other domain: an operation that
// needs another's calls it by ID (Service.Invoke).
package restoreops

import "github.com/coffer-backup/coffer/internal/service"

// Ops runs this domain's operations on a service.
type Ops struct{ *service.Service }
