// Package fake is an in-memory hypervisor for engine tests and benchmarks:
// a configurable fleet of VMs on hosts and datastores, whose disks are
// generated from a seed (no memory per byte), with modelled snapshot
// latencies, injected failures and hangs, leftovers of "crashed" coffer
// processes, and gauges that record how many snapshots were in flight per
// host, per datastore and in total at every instant.
//
// It follows the hypervisor contract: all disks of a VM are frozen at one
// instant; change tracking hands out a token per disk (a generation number)
// whose change set covers every write after that instant; Close(ok=false)
// rolls tracking back; everything created is named "coffer-<SessionID>" and
// journaled before it is created, so CleanupLeftovers finds it after Crash.
//
// Everything is deterministic given Options.Seed: the fleet layout, disk
// contents, latencies and injected transient failures are functions of the
// seed, the VM and the attempt number, never of goroutine timing.
package fake

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// BlockSize is the granularity of allocation, writes and change tracking.
const BlockSize = 64 << 10

// Latency is a range; each operation draws a duration uniformly from it.
type Latency struct{ Min, Max time.Duration }

// Options shape the fleet and its behaviour.
type Options struct {
	Seed       uint64
	Kind       string // Kind() result; default "fake"
	VMs        int    // default 8
	Hosts      int    // default 2
	Datastores int    // default 4
	MaxDisks   int    // each VM gets 1..MaxDisks disks; default 1
	// DiskSize is the largest disk; sizes are drawn from [DiskSize/2,
	// DiskSize] in 4 KiB steps. Default 1 MiB.
	DiskSize int64
	// Allocated is the fraction of blocks holding data at the start;
	// default 0.5, negative for empty disks (nothing to read).
	Allocated                      float64
	SnapshotCreate, SnapshotRemove Latency
	// Contention stretches every snapshot create and remove by this
	// fraction per other operation in flight on the same host (management
	// agent and storage contention): with 0.1 and 10 concurrent operations
	// on a host, each takes 1.9x its base latency.
	Contention float64
	// TransientRate is the probability that a Snapshot call fails with
	// hypervisor.ErrTransient (drawn per VM and attempt).
	TransientRate float64
	// ReadDelay is waited for each block a disk read touches (a slow disk
	// or link), so that a backup lasts long enough to be interrupted
	// part-way.
	ReadDelay time.Duration
	// DiskLatency, when set, is the latency of every guest I/O its
	// sessions report (hypervisor.IOStatser): a congested datastore.
	DiskLatency time.Duration
	// Sleep waits for a modelled latency; default a timer honouring ctx.
	Sleep func(ctx context.Context, d time.Duration) error
	// Hold, when set, is waited for before each block a disk read
	// touches (after ReadDelay): a test holds a backup part-way for as
	// long as it needs, its error ends the read.
	Hold func(ctx context.Context, block int64) error
}

// Connector is the fake hypervisor. Safe for concurrent use.
type Connector struct {
	o     Options
	mu    sync.Mutex
	vms   []*vmState
	byID  map[string]*vmState
	gauge gauge
	live  map[*session]bool
	gen   int
	// hostOps counts snapshot operations in flight per host (contention).
	hostOps map[string]int
	// unhang is closed by Unhang to end hangs that ignore cancellation.
	unhang      chan struct{}
	unhangOnce  sync.Once
	storage     map[*storageSnapshot]bool
	storageFail map[string]error
	// counters for assertions
	creates, removes, closedOK, closedFail int
	opTime                                 time.Duration
	storageTaken, storageDeleted           int
	// closes counts Close calls: a connector's session with its
	// hypervisor ends once, when its last user is done with it.
	closes int
}

type vmState struct {
	vm       hypervisor.VM
	disks    []*diskState
	attempts int
	objects  map[string]*object // hypervisor-side objects on this VM
	fault    fault
}

type object struct {
	kind    string
	session *session // nil: not owned by a live session (leftover or foreign)
}

type diskState struct {
	info    hypervisor.DiskInfo
	seed    uint64
	written map[int64]uint32       // block -> version (0 = initial content)
	dirty   map[int]map[int64]bool // tracking generation -> blocks written since
	order   []int                  // generations, oldest first (pruned)
	alloc   func(block int64) bool // initial allocation
	kept    keptBlocks             // keptKey -> []byte: versions WriteAt wrote
}

// maxGenerations bounds the tracking generations kept per disk; older
// tokens are reported as lost bitmaps (a full read with a warning).
const maxGenerations = 16

// New builds a fleet.
func New(o Options) *Connector {
	if o.Kind == "" {
		o.Kind = "fake"
	}
	o.VMs = defInt(o.VMs, 8)
	o.Hosts = defInt(o.Hosts, 2)
	o.Datastores = defInt(o.Datastores, 4)
	o.MaxDisks = defInt(o.MaxDisks, 1)
	if o.DiskSize <= 0 {
		o.DiskSize = 1 << 20
	}
	if o.Allocated == 0 {
		o.Allocated = 0.5
	}
	if o.Sleep == nil {
		o.Sleep = sleep
	}
	c := &Connector{o: o, byID: map[string]*vmState{}, live: map[*session]bool{}, hostOps: map[string]int{},
		unhang: make(chan struct{}), storage: map[*storageSnapshot]bool{}}
	c.gauge.init()
	rng := rand.New(rand.NewPCG(o.Seed, 0x636f66666572))
	prefixes := []string{"web", "db", "app", "cache", "mail", "build", "file", "mon"}
	envs := []string{"prod", "staging", "dev"}
	for i := range o.VMs {
		host := fmt.Sprintf("host-%02d", rng.IntN(o.Hosts)+1)
		primary := rng.IntN(o.Datastores)
		vm := hypervisor.VM{
			VMRef:      hypervisor.VMRef{ID: fmt.Sprintf("fake-%d-%05d", o.Seed, i), Name: fmt.Sprintf("%s-%04d", prefixes[i%len(prefixes)], i)},
			Host:       host,
			Tags:       map[string]string{"env": envs[i%len(envs)], "tier": []string{"gold", "silver", "bronze"}[rng.IntN(3)]},
			PowerState: "running", GuestAgent: i%4 != 3, ChangeTracking: true,
		}
		st := &vmState{objects: map[string]*object{}}
		n := 1 + rng.IntN(o.MaxDisks)
		for d := range n {
			ds := primary
			if d > 0 && o.Datastores > 1 && rng.Float64() < 0.2 {
				ds = rng.IntN(o.Datastores)
			}
			size := o.DiskSize/2 + rng.Int64N(o.DiskSize/2/4096+1)*4096
			size = max(size, 4096)
			info := hypervisor.DiskInfo{Key: fmt.Sprintf("disk-%d", d), Name: fmt.Sprintf("vd%c", 'a'+d), Size: size,
				Datastore: datastoreName(ds), Path: fmt.Sprintf("/%s/%s/disk-%d.raw", datastoreName(ds), vm.Name, d), Format: "raw"}
			vm.Disks = append(vm.Disks, info)
			if !contains(vm.Datastores, info.Datastore) {
				vm.Datastores = append(vm.Datastores, info.Datastore)
			}
			st.disks = append(st.disks, newDisk(info, mix(o.Seed, uint64(i), uint64(d)), o.Allocated))
		}
		st.vm = vm
		c.vms = append(c.vms, st)
		c.byID[vm.ID] = st
	}
	return c
}

func datastoreName(i int) string { return fmt.Sprintf("ds-%03d", i+1) }

func newDisk(info hypervisor.DiskInfo, seed uint64, frac float64) *diskState {
	return &diskState{info: info, seed: seed, written: map[int64]uint32{}, dirty: map[int]map[int64]bool{},
		alloc: func(b int64) bool { return frac > 0 && unit(mix(seed, uint64(b), 0xa110c)) < frac }}
}

// Kind implements hypervisor.Connector.
func (c *Connector) Kind() string { return c.o.Kind }

// Inventory implements hypervisor.Connector.
func (c *Connector) Inventory(ctx context.Context) ([]hypervisor.VM, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]hypervisor.VM, len(c.vms))
	for i, st := range c.vms {
		out[i] = cloneVM(st.vm)
	}
	return out, nil
}

func cloneVM(vm hypervisor.VM) hypervisor.VM {
	tags := make(map[string]string, len(vm.Tags))
	for k, v := range vm.Tags {
		tags[k] = v
	}
	vm.Tags = tags
	vm.Datastores = append([]string(nil), vm.Datastores...)
	vm.Disks = append([]hypervisor.DiskInfo(nil), vm.Disks...)
	return vm
}

// SetTag changes a VM's tag (tests of tag-based selection).
func (c *Connector) SetTag(vmName, key, value string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.byNameLocked(vmName); st != nil {
		st.vm.Tags[key] = value
	}
}

// SetPowerState changes what the inventory reports of a VM's power
// ("running", "stopped", ...), for tests of modes that depend on it.
func (c *Connector) SetPowerState(vmName, state string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mustVM(vmName).vm.PowerState = state
}

func (c *Connector) byNameLocked(name string) *vmState {
	for _, st := range c.vms {
		if st.vm.Name == name {
			return st
		}
	}
	return nil
}

func (c *Connector) mustVM(name string) *vmState {
	st := c.byNameLocked(name)
	if st == nil {
		panic("fake: no VM named " + name)
	}
	return st
}

// Write changes n random blocks of every disk of a VM (deterministic in
// the seed and the number of writes so far), marking them dirty for change
// tracking, like a guest writing.
func (c *Connector) Write(vmName string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.mustVM(vmName)
	for _, d := range st.disks {
		blocks := (d.info.Size + BlockSize - 1) / BlockSize
		rng := rand.New(rand.NewPCG(d.seed, uint64(len(d.written))+uint64(c.gen)<<32))
		for range n {
			b := rng.Int64N(blocks)
			d.written[b]++
			for _, set := range d.dirty {
				set[b] = true
			}
		}
	}
}

// Objects lists the names of hypervisor-side objects on a VM (coffer's
// snapshots and anything added with AddForeign), sorted.
func (c *Connector) Objects(vmName string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for name := range c.mustVM(vmName).objects {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// Counters of operations, for assertions.
type Counters struct {
	Creates, Removes           int // snapshot create and remove operations completed
	ClosedOK, ClosedFail       int // sessions closed with ok=true / ok=false
	OpenSessions               int // sessions not yet closed (live process)
	StorageTaken, StorageFreed int // storage snapshots taken / deleted
	Closes                     int // Close calls on the connector itself
	// OpTime is the sum of the modelled durations of every snapshot create
	// and remove (after contention): the elapsed time of a serial run.
	OpTime time.Duration
}

// Counters returns the operation counters.
func (c *Connector) Counters() Counters {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Counters{Creates: c.creates, Removes: c.removes, ClosedOK: c.closedOK, ClosedFail: c.closedFail,
		OpenSessions: len(c.live), StorageTaken: c.storageTaken, StorageFreed: c.storageDeleted, OpTime: c.opTime,
		Closes: c.closes}
}

// Close ends the connector's (simulated) session with its hypervisor, as
// a vSphere logout or a libvirt disconnect does; it is counted, so a test
// sees that every connector opened is closed once.
func (c *Connector) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closes++
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// draw picks a duration from l, deterministically from the key.
func (l Latency) draw(key uint64) time.Duration {
	if l.Max <= l.Min {
		return l.Min
	}
	return l.Min + time.Duration(unit(key)*float64(l.Max-l.Min))
}

// mix is splitmix64 over its arguments: a cheap deterministic hash.
func mix(xs ...uint64) uint64 {
	var h uint64 = 0x9e3779b97f4a7c15
	for _, x := range xs {
		h ^= x
		h += 0x9e3779b97f4a7c15
		h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9
		h = (h ^ (h >> 27)) * 0x94d049bb133111eb
		h ^= h >> 31
	}
	return h
}

func unit(h uint64) float64 { return float64(h>>11) / (1 << 53) }

func defInt(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
