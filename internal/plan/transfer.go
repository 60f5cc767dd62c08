package plan

import "math"

// Transfers share each device equally: a transfer moves at the smallest
// share on its path, or the per-task rate. Rates change only when a
// transfer starts or ends, so between those instants every transfer's
// end is known: the clock jumps from event to event, and the bytes moved
// are settled (sync) only when the rates are about to change.

// sync moves every transfer's bytes up to now at its current rate.
func (r *run) sync() {
	dt := r.now - r.synced
	r.synced = r.now
	if dt <= 0 {
		return
	}
	for _, i := range r.moving {
		s := &r.tasks[i]
		s.remaining = max(s.remaining-s.rate*dt, 0)
		if r.trace {
			s.work[r.limitName(s.limit)] += dt
		}
	}
}

func (r *run) limitName(d int32) string {
	if d < 0 {
		return "transfer at the per-task rate"
	}
	return "transfer at " + r.c.devices[d].key
}

// rates sets every transfer's rate and end, and marks the devices
// saturated; the transfers were synced to now.
func (r *run) rates() {
	r.dirty = false
	r.epoch++
	taskRate := r.c.in.TaskRate
	if taskRate <= 0 {
		taskRate = math.Inf(1)
	}
	r.nextEnd = math.Inf(1)
	touched := r.touched[:0]
	for _, i := range r.moving {
		s := &r.tasks[i]
		s.rate, s.limit = taskRate, -1
		for _, x := range r.path[i] {
			if share := x.scale * r.devInv[x.dev]; share < s.rate {
				s.rate, s.limit = share, x.dev
			}
		}
		if math.IsInf(s.rate, 1) {
			s.rate = math.MaxFloat64 // nothing limits it: it takes no time
		}
		s.tEnd = r.now + s.remaining/s.rate
		r.nextEnd = min(r.nextEnd, s.tEnd)
		for _, x := range r.path[i] {
			if r.devSeen[x.dev] != r.epoch {
				r.devSeen[x.dev], r.devUse[x.dev] = r.epoch, 0
				touched = append(touched, x.dev)
			}
			r.devUse[x.dev] += s.rate * x.factor
		}
	}
	r.touched = touched
	// A device is saturated when its transfers use all of it; one no
	// transfer crosses any more is not.
	busy := r.busyDevs[:0]
	for _, d := range r.busyDevs {
		if r.devSeen[d] != r.epoch {
			r.devBusy[d].set(false, r.now)
		}
	}
	for _, d := range touched {
		on := r.devUse[d] >= r.c.devices[d].rate*(1-1e-9)
		r.devBusy[d].set(on, r.now)
		if on {
			busy = append(busy, d)
		}
	}
	r.busyDevs = busy
}
