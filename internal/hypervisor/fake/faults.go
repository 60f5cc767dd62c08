package fake

import (
	"context"
	"sort"
	"strings"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

type fault struct {
	err       error
	times     int // remaining failing calls; < 0 forever
	hang      bool
	ignoreCtx bool
	readErr   error
}

// FailVM makes the next `times` Snapshot calls of a VM fail with err
// (times < 0: every call). Wrap hypervisor.ErrTransient to test retries.
func (c *Connector) FailVM(name string, err error, times int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.mustVM(name)
	st.fault.err, st.fault.times = err, times
}

// HangVM makes Snapshot calls of a VM hang: until their context ends, or,
// with ignoreContext, until Unhang (a management call that ignores
// cancellation; it then succeeds, and the caller must still close it).
func (c *Connector) HangVM(name string, ignoreContext bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.mustVM(name)
	st.fault.hang, st.fault.ignoreCtx = true, ignoreContext
}

// FailReads makes reads of a VM's disks fail with err.
func (c *Connector) FailReads(name string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mustVM(name).fault.readErr = err
}

// ClearFaults removes every injected fault of a VM.
func (c *Connector) ClearFaults(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mustVM(name).fault = fault{}
}

// Unhang releases every Snapshot call hanging with ignoreContext.
func (c *Connector) Unhang() { c.unhangOnce.Do(func() { close(c.unhang) }) }

// AddLeftover puts an object on a VM as a crashed coffer would have left
// it; the name must start with "coffer-".
func (c *Connector) AddLeftover(vmName, name string) {
	if !strings.HasPrefix(name, "coffer-") {
		panic("fake: leftovers are named coffer-...")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mustVM(vmName).objects[name] = &object{kind: "vm-snapshot"}
}

// AddForeign puts an object on a VM that coffer did not create (an
// operator's snapshot); cleanup must never touch it.
func (c *Connector) AddForeign(vmName, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mustVM(vmName).objects[name] = &object{kind: "vm-snapshot"}
}

// Crash simulates the death of the coffer process: every open session is
// abandoned with its objects left on the hypervisor, and stops counting as
// in flight.
func (c *Connector) Crash() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for s := range c.live {
		s.dead = true
		if !s.released {
			c.gauge.leave(s.st.vm)
		}
		delete(c.live, s)
	}
	for s := range c.storage {
		s.orphan = true
	}
}

// CleanupLeftovers implements hypervisor.Connector: it removes every
// "coffer-" object not owned by a live session of this process, and rolls
// back the change tracking that dead sessions had started.
func (c *Connector) CleanupLeftovers(ctx context.Context) ([]hypervisor.Leftover, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []hypervisor.Leftover
	for _, st := range c.vms {
		var names []string
		for name, o := range st.objects {
			if strings.HasPrefix(name, "coffer-") && (o.session == nil || o.session.dead) {
				names = append(names, name)
			}
		}
		sort.Strings(names)
		for _, name := range names {
			o := st.objects[name]
			if o.session != nil {
				for _, d := range st.disks {
					d.dropGeneration(o.session.gen)
				}
			}
			delete(st.objects, name)
			out = append(out, hypervisor.Leftover{VM: st.vm.VMRef, Kind: o.kind, Name: name, Action: "removed"})
		}
	}
	for s := range c.storage {
		if s.orphan && !s.deleted {
			s.deleted = true
			c.storageDeleted++
			delete(c.storage, s)
			out = append(out, hypervisor.Leftover{Kind: "storage-snapshot", Name: s.label, Action: "removed"})
		}
	}
	return out, nil
}
