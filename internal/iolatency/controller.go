package iolatency

import (
	"math"
	"sort"
	"time"
)

// Shares of the SIOC levels; a policy may also give a number.
const (
	SharesLow    = 500
	SharesNormal = 1000
	SharesHigh   = 2000
)

// The controller's law: AIMD (additive increase, multiplicative decrease)
// on each reader's token-bucket rate, as TCP does on its window.
//
// Why AIMD and not a proportional law like SIOC's (which sets each
// host's queue depth from the ratio of the threshold to the latency):
// coffer does not know the device's model (how latency depends on the
// load), its samples are noisy (a second of a shared SAN, a TCG guest's
// writes), and its readers come and go. AIMD needs no model: it halves
// a reader's rate at every congested interval, which gets a burst under
// control in a few intervals whatever the starting point, and probes back
// up by small steps, so the rate settles in a sawtooth just under where
// latency crosses the threshold. With several readers on one datastore
// AIMD converges to a fair share (Chiu and Jain), and weighting each
// reader's increase by its shares makes the shares decide the split.
//
// Who slows first: at a congested interval only the readers with the
// fewest shares that are still above the floor are cut; readers with
// more shares are cut only once those are at the floor. The floor keeps
// every backup progressing however long production stays congested.
const (
	// decrease is the factor a congested interval multiplies a rate by.
	decrease = 0.5
	// increase is the fraction of a reader's unthrottled throughput an
	// uncongested interval adds to its rate, at normal shares (a reader
	// of high shares gets back twice as fast, one of low shares half).
	increase = 0.125
)

// Settings are one datastore's congestion threshold and floor.
type Settings struct {
	// Threshold is the latency above which the datastore is congested.
	Threshold time.Duration
	// Floor is the lowest rate (bytes/s) a reader is slowed to.
	Floor float64
}

// Reader is one backup task reading from the datastore.
type Reader struct {
	Name   string
	Shares int
	// ceiling is the most the reader may read unthrottled (its static
	// rate limits; +Inf without).
	ceiling float64
	// full is its throughput before it was throttled (bytes/s): where it
	// starts from when slowed, and where it is released.
	full float64
	rate float64 // 0: unthrottled
}

// Rate is the reader's rate limit in bytes/s, 0 when it is not throttled.
func (r *Reader) Rate() float64 { return r.rate }

// Controller decides the rates of a datastore's readers. Not safe for
// concurrent use: the engine steps it from one goroutine per datastore.
type Controller struct {
	s       Settings
	readers []*Reader

	latency   time.Duration
	sampled   bool
	congested bool
}

// NewController makes the controller of one datastore.
func NewController(s Settings) *Controller { return &Controller{s: s} }

// Settings are the controller's.
func (c *Controller) Settings() Settings { return c.s }

// Add registers a reader with its shares (0: normal) and its ceiling in
// bytes/s (0: none).
func (c *Controller) Add(name string, shares int, ceiling float64) *Reader {
	if shares <= 0 {
		shares = SharesNormal
	}
	if ceiling <= 0 {
		ceiling = math.Inf(1)
	}
	r := &Reader{Name: name, Shares: shares, ceiling: ceiling}
	c.readers = append(c.readers, r)
	return r
}

// Remove forgets a reader.
func (c *Controller) Remove(r *Reader) {
	for i, x := range c.readers {
		if x == r {
			c.readers = append(c.readers[:i], c.readers[i+1:]...)
			return
		}
	}
}

// Readers are the registered readers.
func (c *Controller) Readers() []*Reader { return c.readers }

// Latency is the last interval's latency and whether it had any.
func (c *Controller) Latency() (time.Duration, bool) { return c.latency, c.sampled }

// Congested reports whether the last interval was above the threshold.
func (c *Controller) Congested() bool { return c.congested }

// Change is a reader's rate moving at a step; From or To is 0 when the
// reader was or is now unthrottled.
type Change struct {
	Reader   *Reader
	From, To float64
}

// Engaged reports a reader that was unthrottled and is now slowed.
func (ch Change) Engaged() bool { return ch.From == 0 && ch.To > 0 }

// Released reports a reader that was slowed and is now unthrottled.
func (ch Change) Released() bool { return ch.From > 0 && ch.To == 0 }

// Step takes one interval's latency (sampled false: no production I/O
// completed in it) and each reader's throughput over it in bytes/s, and
// returns the readers whose rate changed.
func (c *Controller) Step(latency time.Duration, sampled bool, throughput map[*Reader]float64) []Change {
	c.latency, c.sampled = latency, sampled
	c.congested = sampled && latency > c.s.Threshold
	for _, r := range c.readers {
		if tp := math.Min(throughput[r], r.ceiling); r.rate == 0 && tp > 0 {
			r.full = tp
		}
	}
	if c.congested {
		return c.slow()
	}
	return c.recover()
}

// slow cuts the readers of the fewest shares that are above the floor.
func (c *Controller) slow() []Change {
	var cut []*Reader
	for _, r := range c.readers {
		// A reader no faster than the floor unthrottled is left alone:
		// slowing it to the floor would not slow it.
		if (r.rate == 0 && r.full > c.s.Floor) || r.rate > c.s.Floor {
			cut = append(cut, r)
		}
	}
	if len(cut) == 0 {
		return nil // every reader at the floor (or not reading faster)
	}
	sort.SliceStable(cut, func(i, j int) bool { return cut[i].Shares < cut[j].Shares })
	var out []Change
	for _, r := range cut {
		if r.Shares != cut[0].Shares {
			break
		}
		from := r.rate
		start := from
		if start == 0 {
			start = r.full
		}
		r.rate = math.Max(c.s.Floor, start*decrease)
		if r.rate <= 0 { // a floor of 0 and a reader of under 2 bytes/s
			r.rate = 1
		}
		out = append(out, Change{Reader: r, From: from, To: r.rate})
	}
	return out
}

// recover raises every throttled reader by its step, releasing those
// back at the throughput they had before.
func (c *Controller) recover() []Change {
	var out []Change
	for _, r := range c.readers {
		if r.rate == 0 {
			continue
		}
		from := r.rate
		r.rate += math.Max(r.full*increase, c.s.Floor*increase) * float64(r.Shares) / SharesNormal
		if r.rate >= r.full {
			r.rate = 0
		}
		out = append(out, Change{Reader: r, From: from, To: r.rate})
	}
	return out
}
