// Package mediaops holds sequential media: the media libraries of the configuration, labelling, copies to tape multiplexed onto its drives, restores and file extraction from tape without the repository, verification and the media catalogue.
//
// Its operations are methods of Ops, the kernel's service (package
// service: opening repositories, tasks, the configuration in effect) seen
// from this domain, and its table (operations.go) binds each to its ID,
// route and access rules. It imports no other domain: an operation that
// needs another's calls it by ID (Service.Invoke).
package mediaops

import "github.com/coffer-backup/coffer/internal/service"

// Ops runs this domain's operations on a service.
type Ops struct{ *service.Service }
