package iolatency

import (
	"math"
	"testing"
	"time"
)

const mib = 1 << 20

// step feeds one interval in which every reader read at its rate limit,
// or at unthrottled when it has none.
func step(c *Controller, lat time.Duration, unthrottled float64) []Change {
	tp := map[*Reader]float64{}
	for _, r := range c.Readers() {
		tp[r] = unthrottled
		if r.Rate() > 0 {
			tp[r] = r.Rate()
		}
	}
	return c.Step(lat, true, tp)
}

func TestControllerEngagesAboveThresholdAndRecoversBelow(t *testing.T) {
	c := NewController(Settings{Threshold: 30 * time.Millisecond, Floor: 4 * mib})
	r := c.Add("web-1", 0, 0)
	// Below the threshold, and exactly at it: nothing happens.
	for _, lat := range []time.Duration{5 * time.Millisecond, 29 * time.Millisecond, 30 * time.Millisecond} {
		if ch := step(c, lat, 100*mib); len(ch) != 0 || r.Rate() != 0 || c.Congested() {
			t.Fatalf("latency %s: changes %v, rate %.0f, congested %v", lat, ch, r.Rate(), c.Congested())
		}
	}
	ch := step(c, 45*time.Millisecond, 100*mib)
	if len(ch) != 1 || !ch[0].Engaged() || r.Rate() != 50*mib || !c.Congested() {
		t.Fatalf("first congested interval: changes %+v, rate %.0f MiB/s, want an engagement at 50", ch, r.Rate()/mib)
	}
	step(c, 45*time.Millisecond, 100*mib)
	if r.Rate() != 25*mib {
		t.Fatalf("second congested interval: rate %.1f MiB/s, want 25", r.Rate()/mib)
	}
	// Latency falls: the rate climbs by 1/8 of the 100 MiB/s it had per
	// interval and is released once back there.
	var released int
	for i := 1; i <= 20 && released == 0; i++ {
		before := r.Rate()
		for _, ch := range step(c, 10*time.Millisecond, 100*mib) {
			if ch.Released() {
				released = i
			}
		}
		if released == 0 && r.Rate() != before+12.5*mib {
			t.Fatalf("recovery interval %d: %.1f -> %.1f MiB/s, want +12.5", i, before/mib, r.Rate()/mib)
		}
	}
	if released != 6 || r.Rate() != 0 || c.Congested() {
		t.Fatalf("released after %d intervals (rate %.1f), want 6 (25 + 6 x 12.5 >= 100)", released, r.Rate()/mib)
	}
}

func TestControllerNoSampleIsNotCongestion(t *testing.T) {
	c := NewController(Settings{Threshold: 30 * time.Millisecond, Floor: mib})
	r := c.Add("web-1", 0, 0)
	step(c, 50*time.Millisecond, 80*mib)
	// An interval in which production completed no I/O at all: whatever
	// latency figure comes with it, nobody waited.
	c.Step(time.Second, false, map[*Reader]float64{r: r.Rate()})
	if c.Congested() || r.Rate() != 40*mib+10*mib {
		t.Fatalf("after an interval without production I/O: congested %v, rate %.1f MiB/s, want 50 (recovering)", c.Congested(), r.Rate()/mib)
	}
}

func TestControllerFloorHolds(t *testing.T) {
	c := NewController(Settings{Threshold: 30 * time.Millisecond, Floor: 4 * mib})
	r := c.Add("web-1", 0, 0)
	for i := 0; i < 40; i++ {
		step(c, 200*time.Millisecond, 400*mib)
		if r.Rate() < 4*mib {
			t.Fatalf("interval %d: rate %.2f MiB/s, under the 4 MiB/s floor", i, r.Rate()/mib)
		}
	}
	if r.Rate() != 4*mib {
		t.Fatalf("after 40 congested intervals: %.2f MiB/s, want the floor", r.Rate()/mib)
	}
	if ch := step(c, 200*time.Millisecond, 400*mib); len(ch) != 0 {
		t.Fatalf("at the floor a congested interval still changed %+v", ch)
	}
	// A reader that reads no faster than the floor anyway is never
	// engaged (it would be engaged and released every other interval).
	slow := c.Add("tiny", 0, 0)
	c.Step(200*time.Millisecond, true, map[*Reader]float64{r: r.Rate(), slow: 2 * mib})
	if slow.Rate() != 0 {
		t.Fatalf("a 2 MiB/s reader was throttled to %.1f MiB/s under a 4 MiB/s floor", slow.Rate()/mib)
	}
}

func TestControllerCeilingBoundsTheStart(t *testing.T) {
	c := NewController(Settings{Threshold: 30 * time.Millisecond, Floor: mib})
	// A reader limited to 10 MiB/s whose first interval read a burst.
	r := c.Add("web-1", 0, 10*mib)
	c.Step(time.Second, true, map[*Reader]float64{r: 300 * mib})
	if r.Rate() != 5*mib {
		t.Fatalf("rate %.1f MiB/s, want half its 10 MiB/s ceiling", r.Rate()/mib)
	}
}

func TestControllerSharesOrderWhoSlowsFirst(t *testing.T) {
	c := NewController(Settings{Threshold: 30 * time.Millisecond, Floor: 4 * mib})
	low := c.Add("archive", SharesLow, 0)
	normal := c.Add("nightly", SharesNormal, 0)
	high := c.Add("db", SharesHigh, 0)
	var order []string
	seen := map[*Reader]bool{}
	for i := 0; i < 30 && len(order) < 3; i++ {
		for _, ch := range step(c, 80*time.Millisecond, 64*mib) {
			if ch.Engaged() && !seen[ch.Reader] {
				seen[ch.Reader] = true
				order = append(order, ch.Reader.Name)
				// Nobody of more shares is slowed while a reader of
				// fewer is above the floor.
				for _, r := range c.Readers() {
					if r.Shares < ch.Reader.Shares && r.Rate() != 4*mib {
						t.Fatalf("%s (%d shares) engaged while %s (%d shares) reads at %.1f MiB/s, above the floor",
							ch.Reader.Name, ch.Reader.Shares, r.Name, r.Shares, r.Rate()/mib)
					}
				}
			}
		}
	}
	if len(order) != 3 || order[0] != "archive" || order[1] != "nightly" || order[2] != "db" {
		t.Fatalf("engaged in order %v, want archive, nightly, db", order)
	}
	// Recovery: more shares, bigger steps.
	before := map[*Reader]float64{low: low.Rate(), normal: normal.Rate(), high: high.Rate()}
	step(c, time.Millisecond, 64*mib)
	dl, dn, dh := low.Rate()-before[low], normal.Rate()-before[normal], high.Rate()-before[high]
	if math.Abs(dn-2*dl) > 1 || math.Abs(dh-2*dn) > 1 {
		t.Fatalf("recovery steps low %.1f normal %.1f high %.1f MiB/s, want 1:2:4", dl/mib, dn/mib, dh/mib)
	}
}

func TestControllerRemove(t *testing.T) {
	c := NewController(Settings{Threshold: time.Millisecond, Floor: mib})
	a, b := c.Add("a", 0, 0), c.Add("b", 0, 0)
	c.Remove(a)
	if rs := c.Readers(); len(rs) != 1 || rs[0] != b {
		t.Fatalf("readers after removing a: %v", rs)
	}
}
