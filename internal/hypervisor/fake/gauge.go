package fake

import "github.com/coffer-backup/coffer/internal/hypervisor"

// A VM counts as "in flight" from the moment its Snapshot call starts until
// its snapshot is removed (Close or Release) or the call fails: the span
// during which the hypervisor carries coffer's load. The engine holds its
// limit slots for a superset of that span, so any peak above a limit is an
// engine bug.
type gauge struct {
	total, maxTotal int
	host, maxHost   map[string]int
	ds, maxDS       map[string]int
	groups          []*trackedGroup
}

type trackedGroup struct {
	name     string
	match    func(hypervisor.VM) bool
	cur, max int
}

func (g *gauge) init() {
	g.host, g.maxHost = map[string]int{}, map[string]int{}
	g.ds, g.maxDS = map[string]int{}, map[string]int{}
}

func (g *gauge) enter(vm hypervisor.VM) {
	g.total++
	g.maxTotal = max(g.maxTotal, g.total)
	g.host[vm.Host]++
	g.maxHost[vm.Host] = max(g.maxHost[vm.Host], g.host[vm.Host])
	for _, d := range vm.Datastores {
		g.ds[d]++
		g.maxDS[d] = max(g.maxDS[d], g.ds[d])
	}
	for _, t := range g.groups {
		if t.match(vm) {
			t.cur++
			t.max = max(t.max, t.cur)
		}
	}
}

func (g *gauge) leave(vm hypervisor.VM) {
	g.total--
	g.host[vm.Host]--
	for _, d := range vm.Datastores {
		g.ds[d]--
	}
	for _, t := range g.groups {
		if t.match(vm) {
			t.cur--
		}
	}
}

// Peaks are the highest numbers of VMs in flight seen at any instant.
type Peaks struct {
	Total     int
	Host      map[string]int
	Datastore map[string]int
	Group     map[string]int
	// Now is the number in flight at the time Peaks was called.
	Now int
}

// MaxHost is the highest peak over all hosts.
func (p Peaks) MaxHost() int { return maxOf(p.Host) }

// MaxDatastore is the highest peak over all datastores.
func (p Peaks) MaxDatastore() int { return maxOf(p.Datastore) }

func maxOf(m map[string]int) int {
	n := 0
	for _, v := range m {
		n = max(n, v)
	}
	return n
}

// Peaks returns the concurrency peaks observed so far.
func (c *Connector) Peaks() Peaks {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := Peaks{Total: c.gauge.maxTotal, Host: map[string]int{}, Datastore: map[string]int{}, Group: map[string]int{}, Now: c.gauge.total}
	for k, v := range c.gauge.maxHost {
		p.Host[k] = v
	}
	for k, v := range c.gauge.maxDS {
		p.Datastore[k] = v
	}
	for _, t := range c.gauge.groups {
		p.Group[t.name] = t.max
	}
	return p
}

// TrackGroup counts VMs in flight that match, reported in Peaks.Group (for
// asserting resource-group limits).
func (c *Connector) TrackGroup(name string, match func(hypervisor.VM) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gauge.groups = append(c.gauge.groups, &trackedGroup{name: name, match: match})
}
