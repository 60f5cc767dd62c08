// Package servicetest plugs test doubles into the service layer. It is
// imported by tests only (and bench/), never by cmd/coffer, so what it
// registers does not ship in the binary.
package servicetest

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	hvall "github.com/coffer-backup/coffer/internal/hypervisor/all"
	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
)

// FakeKind is the connection kind of the simulated fleet.
const FakeKind = "fake"

// FakeKVMKind is the simulated fleet as a KVM estate: the same options,
// but the engine routes its VMs as it does QEMU's and libvirt's, to the
// worker of their host (engine.RouteOf), which the fake kind, routed by
// connection like vSphere, cannot show.
const FakeKVMKind = "fake-kvm"

// fakeOptions shape a simulated fleet (kind: fake), for tests of policies,
// limits and the engine without a hypervisor:
//
//	connections:
//	  - name: sim
//	    kind: fake
//	    options: {vms: 200, hosts: 5, datastores: 20, disk-size: 4MiB, snapshot-create: 50ms}
//
// transient-rate and fail inject faults; read-delay slows each 64 KiB block
// read, so a backup can be interrupted part-way; hold-until holds the
// reads of blocks from hold-from-block on until a file of that path
// exists (a test, in another process, then sees a backup part-way for as
// long as it needs, and creates the file to let it end); disk-latency is
// the latency its sessions report for the guests' I/O (latency-control).
type fakeOptions struct {
	Seed           uint64        `yaml:"seed"`
	VMs            int           `yaml:"vms"`
	Hosts          int           `yaml:"hosts"`
	Datastores     int           `yaml:"datastores"`
	MaxDisks       int           `yaml:"max-disks"`
	DiskSize       string        `yaml:"disk-size"`
	Allocated      float64       `yaml:"allocated"`
	SnapshotCreate time.Duration `yaml:"snapshot-create"`
	SnapshotRemove time.Duration `yaml:"snapshot-remove"`
	Contention     float64       `yaml:"contention"`
	TransientRate  float64       `yaml:"transient-rate"`
	ReadDelay      time.Duration `yaml:"read-delay"`   // per 64 KiB block read
	DiskLatency    time.Duration `yaml:"disk-latency"` // of the guest's I/O, as its sessions report it
	HoldUntil      string        `yaml:"hold-until"`
	HoldFromBlock  int64         `yaml:"hold-from-block"`
	// Fail names VMs whose snapshots always fail.
	Fail []string `yaml:"fail"`
}

var registerOnce sync.Once

var (
	openedMu sync.Mutex
	opened   = map[string][]*fake.Connector{}
	// unrecorded: a coffer process a test started, which opens a
	// connector per worker unit and whose record no test can read.
	unrecorded bool
)

// DoNotRecord stops Opened's record in this process: a coffer process
// that a test re-runs its binary as (clitest.Main) would otherwise keep
// every connector it opened, thousands on a worker of a simulated fleet.
func DoNotRecord() {
	openedMu.Lock()
	defer openedMu.Unlock()
	unrecorded, opened = true, map[string][]*fake.Connector{}
}

// Opened lists the simulated connectors opened for connection name in
// this test binary, oldest first: a test sees which operations shared
// one (and so one set of in-flight peaks).
func Opened(name string) []*fake.Connector {
	openedMu.Lock()
	defer openedMu.Unlock()
	return append([]*fake.Connector(nil), opened[name]...)
}

// RegisterFake makes `kind: fake` connections (internal/hypervisor/fake)
// available to the service, in the calling test binary only. The fake
// provides storage snapshots itself (a simulated array) and cannot save
// memory.
func RegisterFake() {
	registerOnce.Do(func() {
		for _, kind := range []string{FakeKind, FakeKVMKind} {
			hvall.Register(kind, hvall.Kind{
				Check:            func(cfg hvall.Config) error { _, err := decode(cfg); return err },
				Open:             func(ctx context.Context, cfg hvall.Config) (hypervisor.Connector, error) { return open(ctx, kind, cfg) },
				StorageSnapshots: true,
				DiskLatency:      true,
				Cannot:           map[hypervisor.SnapshotMode]string{hypervisor.WithMemory: "the simulated fleet has no memory to save"},
			})
		}
	})
}

func decode(cfg hvall.Config) (fakeOptions, error) {
	var o fakeOptions
	if err := cfg.DecodeOptions(&o); err != nil {
		return o, err
	}
	if o.DiskSize != "" {
		if _, err := config.ParseSize(o.DiskSize); err != nil {
			return o, fmt.Errorf("connection %s: options.disk-size: %w", cfg.Name, err)
		}
	}
	return o, nil
}

func open(_ context.Context, kind string, cfg hvall.Config) (hypervisor.Connector, error) {
	o, err := decode(cfg)
	if err != nil {
		return nil, api.WithClass(api.Invalid, err)
	}
	fo := fake.Options{Kind: kind, Seed: o.Seed, VMs: o.VMs, Hosts: o.Hosts, Datastores: o.Datastores, MaxDisks: o.MaxDisks,
		Allocated: o.Allocated, Contention: o.Contention, TransientRate: o.TransientRate, ReadDelay: o.ReadDelay, DiskLatency: o.DiskLatency,
		SnapshotCreate: fake.Latency{Min: o.SnapshotCreate, Max: o.SnapshotCreate},
		SnapshotRemove: fake.Latency{Min: o.SnapshotRemove, Max: o.SnapshotRemove}}
	if o.DiskSize != "" {
		fo.DiskSize, _ = config.ParseSize(o.DiskSize) // checked by decode
	}
	if o.HoldUntil != "" {
		fo.Hold = holdUntil(o.HoldUntil, o.HoldFromBlock)
	}
	c := fake.New(fo)
	vms, _ := c.Inventory(context.Background())
	for _, name := range o.Fail {
		found := false
		for _, vm := range vms {
			found = found || vm.Name == name
		}
		if !found {
			return nil, fmt.Errorf("fail: no VM named %q in the simulated fleet", name)
		}
		c.FailVM(name, fmt.Errorf("simulated failure"), -1)
	}
	openedMu.Lock()
	defer openedMu.Unlock()
	if unrecorded {
		return reporting{Connector: c, name: cfg.Name, log: cfg.Logger}, nil
	}
	opened[cfg.Name] = append(opened[cfg.Name], c)
	return c, nil
}

// reporting is a simulated connector in a coffer process a test started,
// whose counters no test can read: its Close logs them, so that the test
// sees in the process's log whether every snapshot it took was removed
// and every session closed (a cancelled attempt's, say).
type reporting struct {
	*fake.Connector
	name string
	log  *slog.Logger
}

func (r reporting) Close() error {
	n := r.Counters()
	log := r.log
	if log == nil {
		log = slog.Default()
	}
	log.Info("simulated connection closed", "connection", r.name, "open_sessions", n.OpenSessions,
		"snapshots_left", n.Creates-n.Removes, "storage_snapshots_left", n.StorageTaken-n.StorageFreed)
	return r.Connector.Close()
}

// holdUntil holds the reads of blocks from the from'th on until a file at
// path exists, looking every 10 ms (the test that creates it is another
// process), or the read's context ends.
func holdUntil(path string, from int64) func(ctx context.Context, block int64) error {
	return func(ctx context.Context, block int64) error {
		if block < from {
			return nil
		}
		for {
			if _, err := os.Stat(path); err == nil {
				return nil
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}
