// Package fleet is coffer's fleet of workers: the processes that move
// data for the server, one on every hypervisor host or proxy (issue 36).
//
// A worker is a `coffer worker` process. It registers under a name in the
// catalog's worker registry (catalog.Workers) with its reach (what it can
// get at: connections, hosts, datastores, libraries, repositories, whether
// it can boot a VM) and its slots (how many tasks it runs at once), then
// renews a heartbeat every few seconds while it works. Each registration
// raises the worker's epoch, and every write a worker makes carries it:
// one from an earlier registration is refused (catalog.ErrFenced).
//
// Two rules keep a unit of work from running twice. The server leader's
// Watch declares lost a worker that has not renewed for the dead interval
// (30 s) and hands its units back to the dispatcher. A worker that cannot
// renew for half that interval fences itself: it cancels its running work
// before anyone can have declared it lost. Member is the worker's side,
// Watch the server's.
package fleet

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// Protocol is the version of what a worker and the servers of its catalog
// exchange (the registry's row, the hand-off of work, its fences). It is
// raised when either side could misread the other. 2: units and batches
// carry their share of limits.rate, which a worker of 1 would ignore,
// reading past the limit. 3: a unit's end notice carries its outcome,
// under a key a worker of 2 would not echo, and which a server of 2
// could not read (its waiters would sleep to their recheck).
// queue.ProtocolVersion follows it.
const Protocol = 3

// Worker is a row of the registry; Reach is what a worker can get at.
type (
	Worker = catalog.Worker
	Reach  = catalog.WorkerReach
)

// The defaults of the timings (Config, Watch).
const (
	DefaultHeartbeat = 5 * time.Second
	DefaultDeadAfter = 30 * time.Second
)

// MaxNameLen bounds a worker's name: its River queue is "w-<name>", and
// River's queue names have at most 64 characters (8 are kept spare).
const MaxNameLen = 56

// validName is River's rule for queue names, so that "w-<name>" is one.
var validName = regexp.MustCompile(`^[a-z0-9]+([_-]?[a-z0-9]+)*$`)

// CheckName refuses a name a worker cannot have.
func CheckName(name string) error {
	if len(name) > MaxNameLen || !validName.MatchString(name) {
		return fmt.Errorf("fleet: %q is not a worker name: lower-case letters and digits, single - or _ between them, at most %d characters",
			name, MaxNameLen)
	}
	return nil
}

// ErrProtocol refuses a worker that speaks a protocol the servers do not.
var ErrProtocol = errors.New("fleet: protocol not spoken")
