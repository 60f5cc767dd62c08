// Package workerops holds the fleet's workers as the faces see them: the
// registry's listing (what each worker reaches, its slots, its state and
// last heartbeat) and an operator's drain. The workers themselves and
// their fences are internal/fleet's.
//
// Its operations are methods of Ops, the kernel's service (package
// service) seen from this domain, and its table (operations.go) binds
// each to its ID, route and access rules. It imports no other domain.
package workerops

import "github.com/coffer-backup/coffer/internal/service"

// Ops runs this domain's operations on a service.
type Ops struct{ *service.Service }
