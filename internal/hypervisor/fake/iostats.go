package fake

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

var _ hypervisor.IOStatser = (*session)(nil)

// ioReads counts the operations DiskIO reported: each call adds ten, of
// Options.DiskLatency each, to every disk.
var ioReads atomic.Uint64

// DiskIO implements hypervisor.IOStatser: the guest's disks as congested
// as Options.DiskLatency says, for tests of latency throttling. Without
// it the counters are unknown (an error), as for a hypervisor that keeps
// none.
func (s *session) DiskIO(context.Context) ([]hypervisor.DiskIO, error) {
	if s.c.o.DiskLatency <= 0 {
		return nil, errors.New("fake: no disk latency modelled")
	}
	n := ioReads.Add(10)
	out := make([]hypervisor.DiskIO, 0, len(s.disks))
	for _, d := range s.disks {
		out = append(out, hypervisor.DiskIO{Key: d.Key, Ops: n, Time: time.Duration(n) * s.c.o.DiskLatency})
	}
	return out, nil
}
