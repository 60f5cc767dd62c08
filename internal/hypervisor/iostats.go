package hypervisor

import (
	"context"
	"time"
)

// DiskIO are the cumulative I/O counters of one disk of a VM as its
// hypervisor times the guest's requests: reads and writes completed, and
// the time they took, summed since the VM started. Two readings give the
// latency production saw in between (internal/iolatency).
type DiskIO struct {
	Key  string // DiskInfo.Key
	Ops  uint64
	Time time.Duration
}

// IOStatser is a Session that can read its VM's disk counters while it is
// open (QEMU's query-blockstats through the session's monitor): the job
// engine watches the latency of the VMs it reads while it reads them.
type IOStatser interface {
	DiskIO(ctx context.Context) ([]DiskIO, error)
}
