// Package upgradeops holds what an operator asks before installing
// another coffer: what it would migrate, and what of other versions
// shares the catalog, the repositories and the configuration
// (docs/upgrading.md).
//
// Its operations are methods of Ops, the kernel's service seen from this
// domain, and its table (operations.go) binds each to its ID, route and
// access rules. It imports no other domain.
package upgradeops

import "github.com/coffer-backup/coffer/internal/service"

// Ops runs this domain's operations on a service.
type Ops struct{ *service.Service }
