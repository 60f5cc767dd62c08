package engine

import "sync"

// Held is a unit this engine did not grant but must count: one a previous
// leader granted (a River job in its worker's queue), which may still run
// when this server takes the schedules over. Until it is released, its
// pools are counted as occupied, so the dispatcher never grants past a
// limit while the previous leader's units run, and no unit of its VM
// starts (a VM is backed up once at a time).
type Held struct {
	// Pools are the keys of the pools the unit occupied, a key once per
	// slot (Placement.Pools: "global", "policy:nightly", "host:lab/h1",
	// "worker:kvm1", ...). A pool this engine has no limit for is counted
	// all the same, and takes its capacity from the first job that needs
	// it.
	Pools []string
	// Connection and VMID name the unit's VM.
	Connection, VMID string
}

// Hold counts h as occupying its pools until release is called (once;
// later calls do nothing), then starts what its slots let start. A pool
// made over its capacity by a hold (a limit lowered meanwhile) is so
// until enough units are done, as after a reload.
func (e *Engine) Hold(h Held) (release func()) {
	d := e.disp
	d.mu.Lock()
	defer d.unlock()
	held := make([]*resource, 0, len(h.Pools))
	for _, key := range h.Pools {
		r := d.res[key]
		if r == nil {
			r = &resource{key: key} // no capacity yet: nothing fits it before a job sets one
			d.res[key] = r
		}
		r.used++
		held = append(held, r)
	}
	vm := h.Connection + "/" + h.VMID
	if d.heldVMs == nil {
		d.heldVMs = map[string]int{}
	}
	d.heldVMs[vm]++
	var once sync.Once
	return func() {
		once.Do(func() {
			d.mu.Lock()
			defer d.unlock()
			for _, r := range held {
				r.used--
			}
			if d.heldVMs[vm]--; d.heldVMs[vm] == 0 {
				delete(d.heldVMs, vm)
			}
			d.pumpLocked()
		})
	}
}

// heldVM says why u must wait for a held unit of its VM ("": it need not).
func (d *dispatcher) heldVM(u *unit) string {
	if len(d.heldVMs) == 0 || u.vm == "" || d.heldVMs[u.vm] == 0 {
		return ""
	}
	return "its VM is still backed up under the previous leader's grant"
}

// poolKeys are the keys of the pools a started unit occupies, once per
// slot, its worker's last (Placement.Pools).
func (u *unit) poolKeys() []string {
	var keys []string
	for _, n := range u.needs {
		for range n.n {
			keys = append(keys, n.r.key)
		}
	}
	if u.worker != nil {
		keys = append(keys, u.worker.r.key)
	}
	return keys
}
