package plan

import (
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/procs"
)

// Scenario is what a plan is made from and a variation changes: the
// configuration (limits, groups, repositories), the policy and the VMs
// it selects.
type Scenario struct {
	Config  *policy.Config
	Policy  policy.Policy
	Targets []Target
	History *History
	// Workers are the data movers the run is placed on; none: one
	// process runs it all.
	Workers []engine.Worker
}

// Variation is a what-if: one change to a scenario, written KEY=VALUE.
//
//	tasks=64             limits.tasks
//	per-datastore=12     limits.per-datastore
//	per-host=4           limits.per-host
//	group:NAME=6         a resource group's limit
//	streams=8, streams=+1  the policy's repository's write streams (set, or add to those in effect)
//	multiplexing=2       VM streams per repository target device: the repository's streams
//	add-vms=100          that many VMs more, copies of the selected ones in turn (their history too)
//	move=GLOB:DATASTORE  the selected VMs whose name matches GLOB moved to DATASTORE
//	workers=3, workers=3x2  that many workers (of that many slots each; default: the
//	                     workers' own, else one per core of this machine), reaching
//	                     every connection, the hosts of QEMU and libvirt connections
//	                     dealt among them in turn (host k to worker k mod N)
//	worker-slots=2       every worker's slots
type Variation struct {
	Text  string
	key   string
	arg   string
	n     int
	add   bool // "+N"
	slots int  // workers=NxS
}

// ParseVariation reads one what-if.
func ParseVariation(s string) (Variation, error) {
	key, arg, ok := strings.Cut(strings.TrimSpace(s), "=")
	v := Variation{Text: strings.TrimSpace(s), key: key, arg: arg}
	if !ok || arg == "" {
		return v, fmt.Errorf("what-if %q: write KEY=VALUE (tasks=64, per-datastore=12, per-host=4, group:NAME=6, streams=+1, multiplexing=2, add-vms=100, move=GLOB:DATASTORE, workers=3x2, worker-slots=2)", s)
	}
	switch {
	case key == "move":
		glob, ds, ok := strings.Cut(arg, ":")
		if _, err := path.Match(glob, ""); !ok || glob == "" || ds == "" || err != nil {
			return v, fmt.Errorf("what-if %q: write move=GLOB:DATASTORE, with GLOB a name or a path.Match pattern", s)
		}
		return v, nil
	case key == "tasks", key == "per-datastore", key == "per-host", key == "streams", key == "multiplexing", key == "add-vms",
		key == "workers", key == "worker-slots", strings.HasPrefix(key, "group:") && len(key) > len("group:"):
	default:
		return v, fmt.Errorf("what-if %q: unknown key %q (tasks, per-datastore, per-host, group:NAME, streams, multiplexing, add-vms, move, workers, worker-slots)", s, key)
	}
	num := arg
	if key == "streams" && strings.HasPrefix(arg, "+") {
		v.add, num = true, arg[1:]
	}
	if n, slots, ok := strings.Cut(arg, "x"); key == "workers" && ok {
		k, err := strconv.Atoi(slots)
		if err != nil || k < 1 || k > 10_000 {
			return v, fmt.Errorf("what-if %q: write workers=N or workers=NxSLOTS, SLOTS a whole number from 1 to 10000", s)
		}
		v.slots, num = k, n
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 1 || n > 1_000_000 {
		return v, fmt.Errorf("what-if %q: %q is not a whole number from 1 to 1000000", s, arg)
	}
	v.n = n
	return v, nil
}

// ChangesKept reports whether the variation changes what the policy's
// retention keeps (add-vms adds VMs and their points); the others change
// only how a run goes, so the capacity forecast stays the configured one.
func (v Variation) ChangesKept() bool { return v.key == "add-vms" }

// Apply returns the scenario changed; the original is left as it was.
func (v Variation) Apply(sc Scenario) (Scenario, error) {
	cfg := *sc.Config
	cfg.ResourceGroups = slices.Clone(sc.Config.ResourceGroups)
	cfg.Repositories = slices.Clone(sc.Config.Repositories)
	out := Scenario{Config: &cfg, Policy: sc.Policy, Targets: sc.Targets, History: sc.History, Workers: sc.Workers}
	switch {
	case v.key == "tasks":
		cfg.Limits.Tasks = v.n
	case v.key == "per-datastore":
		cfg.Limits.PerDatastore = v.n
	case v.key == "per-host":
		cfg.Limits.PerHost = v.n
	case strings.HasPrefix(v.key, "group:"):
		name := strings.TrimPrefix(v.key, "group:")
		i := slices.IndexFunc(cfg.ResourceGroups, func(g policy.ResourceGroup) bool { return g.Name == name })
		if i < 0 {
			return sc, fmt.Errorf("what-if %q: no resource group named %q", v.Text, name)
		}
		cfg.ResourceGroups[i].Limit = v.n
	case v.key == "streams", v.key == "multiplexing":
		n := v.n
		if v.add {
			now := engine.RepositoryStreams(sc.Config, sc.Config.Limits.WithDefaults(), sc.Policy.Repository)
			if now <= 0 {
				return sc, fmt.Errorf("what-if %q: repository %q has unlimited write streams: give their number (streams=%d)", v.Text, sc.Policy.Repository, v.n)
			}
			n += now
		}
		i := slices.IndexFunc(cfg.Repositories, func(r policy.Repository) bool { return r.Name == sc.Policy.Repository })
		if i < 0 {
			cfg.Repositories = append(cfg.Repositories, policy.Repository{Name: sc.Policy.Repository})
			i = len(cfg.Repositories) - 1
		}
		cfg.Repositories[i].Streams = n
	case v.key == "add-vms":
		if len(sc.Targets) == 0 {
			return sc, fmt.Errorf("what-if %q: the policy selects no VM to copy", v.Text)
		}
		out.Targets = slices.Clone(sc.Targets)
		out.History = withCopies(sc.History)
		for i := range v.n {
			tg := sc.Targets[i%len(sc.Targets)]
			c := tg
			c.VM.ID = fmt.Sprintf("%s~what-if-%d", tg.VM.ID, i+1)
			c.VM.Name = fmt.Sprintf("%s~what-if-%d", tg.VM.Name, i+1)
			if h := out.History.VMs[VMKey(tg.Connection, tg.VM.ID)]; h != nil {
				out.History.VMs[VMKey(c.Connection, c.VM.ID)] = h
			}
			out.Targets = append(out.Targets, c)
		}
	case v.key == "move":
		glob, ds, _ := strings.Cut(v.arg, ":")
		out.Targets = slices.Clone(sc.Targets)
		moved := 0
		for i, tg := range out.Targets {
			if ok, _ := path.Match(glob, tg.VM.Name); !ok {
				continue
			}
			out.Targets[i].VM = movedTo(tg.VM, ds)
			moved++
		}
		if moved == 0 {
			return sc, fmt.Errorf("what-if %q: no selected VM is named like %q", v.Text, glob)
		}
	case v.key == "workers", v.key == "worker-slots":
		return v.applyWorkers(sc, out)
	}
	return out, nil
}

// movedTo is vm with all its disks on datastore ds.
func movedTo(vm hypervisor.VM, ds string) hypervisor.VM {
	vm.Datastores = []string{ds}
	vm.Disks = slices.Clone(vm.Disks)
	for k := range vm.Disks {
		vm.Disks[k].Datastore = ds
	}
	return vm
}

// applyWorkers changes out's workers: n of them, or their slots.
func (v Variation) applyWorkers(sc, out Scenario) (Scenario, error) {
	if v.key == "workers" {
		slots := v.slots
		if slots == 0 && len(sc.Workers) > 0 {
			slots = sc.Workers[0].Slots
		}
		if slots == 0 {
			slots = procs.Working() // a worker like this machine, one slot per core
		}
		out.Workers = evenWorkers(sc, v.n, slots)
		// The n workers are the policy's own, simulated: its affinity
		// (workers:) names real ones, which w1..wN are not.
		out.Policy.Workers = nil
		return out, nil
	}
	if len(sc.Workers) == 0 {
		return sc, fmt.Errorf("what-if %q: the run has no workers: give workers=N or workers=Nx%d", v.Text, v.n)
	}
	out.Workers = slices.Clone(sc.Workers)
	for i := range out.Workers {
		out.Workers[i].Slots = v.n
	}
	return out, nil
}

// evenWorkers is n workers of slots each, w1 to wN, that reach every
// connection of the targets; the hosts of connections whose VMs are read
// only on their host are dealt among them in turn (in name order), as
// one worker per hypervisor host serves them.
func evenWorkers(sc Scenario, n, slots int) []engine.Worker {
	var conns, hosts []string
	for _, tg := range sc.Targets {
		if !slices.Contains(conns, tg.Connection) {
			conns = append(conns, tg.Connection)
		}
		for _, h := range engine.RouteOf(sc.Config, sc.Policy, tg.Connection, tg.VM).Hosts {
			if k := tg.Connection + "/" + h; !slices.Contains(hosts, k) {
				hosts = append(hosts, k)
			}
		}
	}
	slices.Sort(conns)
	slices.Sort(hosts)
	ws := make([]engine.Worker, n)
	for i := range ws {
		ws[i] = engine.Worker{Name: fmt.Sprintf("w%d", i+1), Slots: slots, Reach: engine.Reach{Connections: conns}}
	}
	for k, h := range hosts {
		ws[k%n].Reach.Hosts = append(ws[k%n].Reach.Hosts, h)
	}
	return ws
}

func withCopies(h *History) *History {
	out := &History{VMs: map[string]*VMHistory{}}
	if h != nil {
		out.Runs = h.Runs
		for k, v := range h.VMs {
			out.VMs[k] = v
		}
	}
	return out
}

// Selected lists the VMs of an inventory a policy selects, as targets.
func Selected(p policy.Policy, conn string, vms []hypervisor.VM) []Target {
	var out []Target
	for _, vm := range p.SelectVMs(vms) {
		out = append(out, Target{Connection: conn, VM: vm})
	}
	return out
}
