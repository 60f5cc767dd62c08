// Package iolatency watches the production latency of the storage a
// backup reads from and decides how fast the backup may read (coffer's
// Storage I/O Control): sources of cumulative I/O counters (a block
// device's /proc/diskstats, a VM disk's QEMU query-blockstats), a Meter
// that turns two readings into the mean latency of the operations
// completed between them, and a Controller that slows readers down while
// the latency is above a congestion threshold and speeds them up again
// when it falls (controller.go). The engine owns the clock and the token
// buckets; this package has neither, so its decisions are tested on
// scripted latency series.
package iolatency

import (
	"context"
	"time"
)

// Counters are cumulative I/O counts of one device or disk, as kernels
// and hypervisors keep them: the operations completed and the time they
// took, summed over all of them since some start.
type Counters struct {
	Ops  uint64
	Time time.Duration
}

// Source reads cumulative counters.
type Source interface {
	// Name says where the counters come from, for logs ("device vda
	// (254:0)", "web-1 disk vda").
	Name() string
	Read(ctx context.Context) (Counters, error)
}

// Meter keeps a source's previous reading and turns the next one into the
// mean latency of the operations completed in between.
type Meter struct {
	src  Source
	last Counters
	have bool
}

// NewMeter meters src; the first Sample only takes the baseline.
func NewMeter(src Source) *Meter { return &Meter{src: src} }

// Source is what the meter reads.
func (m *Meter) Source() Source { return m.src }

// Sample reads the source and returns the mean latency of the operations
// completed since the previous Sample, and whether there was any: an
// interval without operations has no latency (nothing in production
// waited), and neither has the first call or one after the counters went
// backwards (a device or VM restarted), which only set the baseline.
func (m *Meter) Sample(ctx context.Context) (time.Duration, bool, error) {
	c, err := m.src.Read(ctx)
	if err != nil {
		return 0, false, err
	}
	prev, had := m.last, m.have
	m.last, m.have = c, true
	if !had {
		return 0, false, nil
	}
	lat, ok := Latency(prev, c)
	return lat, ok, nil
}

// Latency is the mean latency between two readings of one source: the
// time the operations completed in between took, over their number.
func Latency(prev, cur Counters) (time.Duration, bool) {
	if cur.Ops <= prev.Ops || cur.Time < prev.Time {
		return 0, false
	}
	return (cur.Time - prev.Time) / time.Duration(cur.Ops-prev.Ops), true
}
