package iolatency

import (
	"context"
	"fmt"
	"slices"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// VMDisks is a Source summing the counters of some disks of a VM (those
// on one datastore) as its hypervisor session reports them: their sum
// gives the mean latency over all their operations.
type VMDisks struct {
	VM    string
	Stats hypervisor.IOStatser
	Keys  []string
}

// Name implements Source.
func (v VMDisks) Name() string { return fmt.Sprintf("%s disks %v", v.VM, v.Keys) }

// Read implements Source.
func (v VMDisks) Read(ctx context.Context) (Counters, error) {
	disks, err := v.Stats.DiskIO(ctx)
	if err != nil {
		return Counters{}, err
	}
	var c Counters
	found := 0
	for _, d := range disks {
		if slices.Contains(v.Keys, d.Key) {
			c.Ops += d.Ops
			c.Time += d.Time
			found++
		}
	}
	if found == 0 {
		return Counters{}, fmt.Errorf("%s: the hypervisor reports no counters for disks %v", v.VM, v.Keys)
	}
	return c, nil
}
