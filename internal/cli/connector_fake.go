package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
)

// fakeConnectionOptions shape a simulated fleet (kind: fake), for trying
// policies and limits without a hypervisor, for tests and for benchmarks:
//
//	connections:
//	  - name: sim
//	    kind: fake
//	    options: {vms: 200, hosts: 5, datastores: 20, disk-size: 4MiB, snapshot-create: 50ms}
type fakeConnectionOptions struct {
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
	// Fail names VMs whose snapshots always fail.
	Fail []string `yaml:"fail"`
}

// fakeOptions decodes and checks a connection's options.
func fakeOptions(cfg ConnectionConfig) (fakeConnectionOptions, error) {
	var o fakeConnectionOptions
	if err := cfg.DecodeOptions(&o); err != nil {
		return o, err
	}
	if o.DiskSize != "" {
		if _, err := parseSize(o.DiskSize); err != nil {
			return o, fmt.Errorf("connection %s: options.disk-size: %w", cfg.Name, err)
		}
	}
	return o, nil
}

func newFakeConnector(_ context.Context, cfg ConnectionConfig) (hypervisor.Connector, error) {
	o, err := fakeOptions(cfg)
	if err != nil {
		return nil, usageError{err}
	}
	fo := fake.Options{Seed: o.Seed, VMs: o.VMs, Hosts: o.Hosts, Datastores: o.Datastores, MaxDisks: o.MaxDisks,
		Allocated: o.Allocated, Contention: o.Contention, TransientRate: o.TransientRate,
		SnapshotCreate: fake.Latency{Min: o.SnapshotCreate, Max: o.SnapshotCreate},
		SnapshotRemove: fake.Latency{Min: o.SnapshotRemove, Max: o.SnapshotRemove}}
	if o.DiskSize != "" {
		fo.DiskSize, _ = parseSize(o.DiskSize) // checked by fakeOptions
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
	return c, nil
}
