// Package bootops holds the boot verifications a repository keeps, read
// back: the listing of a repository's verdicts, and one point's result
// with its ladder, each step's evidence and its screenshot. Running a
// verification is restoreops' verify-boot, which stores what these read.
//
// Its operations are methods of Ops, the kernel's service (package
// service) seen from this domain, and its table (operations.go) binds
// each to its ID, route and access rules. It imports no other domain.
package bootops

import "github.com/coffer-backup/coffer/internal/service"

// Ops runs this domain's operations on a service.
type Ops struct{ *service.Service }
