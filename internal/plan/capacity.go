package plan

import (
	"errors"
	"math"
	"sort"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/retention"
)

// The capacity forecast: how much a policy's retention holds in its
// repository once it drops points as fast as it makes them, and how the
// repository grows until then. coffer's own model of its repository
// (docs/design/plan.md, "Capacity"):
//
//   - A repository stores each distinct chunk once, and every point's disk
//     maps are complete. So the points a retention keeps hold, per VM, the
//     oldest kept point's whole content, used × reduction, and for each
//     later kept point the chunks that changed since the kept point before
//     it: the change per run × the runs between them × reduction, at most
//     the whole used bytes again. The run's mode does not enter: a full or
//     a differential stores only what the repository lacks, like an
//     incremental (it reads more, not stores more). Points forgotten in
//     between cost nothing once gc ran: what they changed is either
//     rewritten before the next kept point or held by it.
//   - Metadata: a disk map per kept point (32 bytes per chunk of used
//     data) and, per stored chunk, its pack entry and index entry (48 + 60
//     bytes).
//   - The kept points are the retention's own (retention.Apply) over the
//     schedule's runs on a calendar, in the operator's time zone, so that
//     GFS buckets fall as forget will make them fall; a point under object
//     lock (immutable-for) stays until its lock ends.
//
// The change is linear in the runs: blocks rewritten again between two
// kept points count each time here but once in the repository, so the
// forecast is an upper bound for workloads that rewrite the same blocks.

// Metadata bytes the repository keeps besides the chunks (repository
// format, version 1).
const (
	MapBytesPerChunk   = 32      // a chunk ID in a disk map
	ChunkEntryBytes    = 48 + 60 // a pack trailer entry and an index entry
	DefaultChunkSize   = repo.DefaultChunkSize
	capacityMaxRuns    = 100000 // runs simulated at most (about 1.3 s of CPU, BenchmarkCapacityHourlyGFS)
	capacityLongCycle  = 366 * 24 * time.Hour
	capacityShortCycle = 28 * 24 * time.Hour
)

// CapacityVM is one VM as the forecast sees it, in bytes.
type CapacityVM struct {
	Used      float64 // non-zero bytes of its disks
	Change    float64 // added by a run, before compression
	Reduction float64 // stored per byte added
}

// CapacityInput is one policy's forecast to make.
type CapacityInput struct {
	VMs       []CapacityVM
	Retention retention.Policy
	// ImmutableFor keeps each point at least this long (object lock).
	ImmutableFor time.Duration
	Schedule     cron.Schedule // the policy's runs (not nil)
	// First is the policy's first run; zero: none yet, the forecast
	// starts at the schedule's next run.
	First     time.Time
	Now       time.Time
	Location  *time.Location // for the retention's buckets (nil: local)
	ChunkSize int            // 0: DefaultChunkSize
}

// CapacitySize is the repository's share of the policy at one run.
type CapacitySize struct {
	At             time.Time
	Data, Metadata float64
	Points         int // kept per VM
}

// Bytes is data and metadata.
func (s CapacitySize) Bytes() float64 { return s.Data + s.Metadata }

// CapacityForecast is a policy's forecast.
type CapacityForecast struct {
	// Start is the first simulated run (the policy's first, or the
	// schedule's next when it has none).
	Start time.Time
	// Steady is when the size first reaches the steady state's Low,
	// from which on it only swings with the calendar between Low and
	// Peak; zero when the retention keeps every point (it grows for
	// ever: Peak and Low are then the size a cycle past now).
	Steady    time.Time
	Peak, Low CapacitySize
	// Now is the size at the last run before now (zero before the first).
	Now CapacitySize
	// RunsPerDay is the schedule's; GrowthPerDay the bytes a day adds
	// on average from the first run to Steady (for ever when Steady is
	// zero).
	RunsPerDay, GrowthPerDay float64
	// Sizes is the size after every simulated run, oldest first.
	Sizes []CapacitySize
	// Truncated: the schedule runs too often to simulate the retention's
	// whole reach (more than capacityMaxRuns runs).
	Truncated bool
	// Resumed: the policy's first run is older than the oldest point its
	// retention can keep, and the simulation starts later (at Start).
	Resumed bool
}

// ForecastCapacity simulates the policy's runs and retention: from its
// first run (or, when that is older than anything the retention keeps,
// from as far back as it keeps) to a cycle of the calendar past both now
// and the retention's reach, a year where monthly or yearly points are
// kept, four weeks otherwise.
func ForecastCapacity(in CapacityInput) (*CapacityForecast, error) {
	if in.Schedule == nil {
		return nil, errors.New("plan: a capacity forecast needs a schedule")
	}
	loc := in.Location
	if loc == nil {
		loc = time.Local
	}
	fl := newFleetSizes(in.VMs, in.ChunkSize)
	f := &CapacityForecast{Start: in.First}
	cycle := cycleOf(in.Retention, in.Schedule)
	reached := reach(in.Retention, in.ImmutableFor, in.Schedule)
	switch back := in.Now.Add(-reached - cycle); {
	case f.Start.IsZero() || f.Start.After(in.Now):
		f.Start = in.Schedule.Next(in.Now)
	case !in.Retention.Empty() && f.Start.Before(back):
		// Older than anything the retention keeps: the points at now
		// are those of a policy that began then.
		f.Start, f.Resumed = in.Schedule.Next(back), true
	}
	end := in.Now.Add(cycle)
	if !in.Retention.Empty() && f.Start.Add(reached+cycle).After(end) {
		end = f.Start.Add(reached + cycle)
	}
	var kept []int // run numbers of the points kept, oldest first
	var times []time.Time
	for t, i := f.Start, 0; !t.IsZero() && (i < 2 || !t.After(end)); t, i = in.Schedule.Next(t), i+1 {
		if i == capacityMaxRuns {
			f.Truncated = true
			break
		}
		times = append(times, t)
		kept = append(kept, i)
		if !in.Retention.Empty() {
			kept = keep(in.Retention, in.ImmutableFor, kept, times, loc)
		}
		size := fl.size(kept)
		size.At = t
		f.Sizes = append(f.Sizes, size)
		if !t.After(in.Now) {
			f.Now = size
		}
	}
	first, last := f.Sizes[0], f.Sizes[len(f.Sizes)-1]
	// The schedule's runs: the first may be a run off the schedule
	// (the policy's first, run by hand).
	if n := len(f.Sizes); n > 2 {
		f.RunsPerDay = float64(n-2) / (last.At.Sub(f.Sizes[1].At).Hours() / 24)
	} else if days := last.At.Sub(first.At).Hours() / 24; days > 0 {
		f.RunsPerDay = float64(n-1) / days
	}
	if in.Retention.Empty() {
		f.Peak, f.Low = last, last
		f.GrowthPerDay = fl.growthPerRun() * f.RunsPerDay
		return f, nil
	}
	// The last cycle is the steady state's swing; the steady state
	// begins when the size first reaches its low.
	f.Peak, f.Low = last, last
	for _, s := range f.Sizes {
		if !s.At.Before(last.At.Add(-cycle)) {
			if s.Bytes() > f.Peak.Bytes() {
				f.Peak = s
			}
			if s.Bytes() < f.Low.Bytes() {
				f.Low = s
			}
		}
	}
	for _, s := range f.Sizes {
		if s.Bytes() >= f.Low.Bytes()*(1-1e-12) {
			f.Steady = s.At
			if days := s.At.Sub(first.At).Hours() / 24; days > 0 {
				f.GrowthPerDay = (s.Bytes() - first.Bytes()) / days
			}
			break
		}
	}
	return f, nil
}

// keep applies the retention (and the object lock) to the points made
// at the runs kept so far, as forget does after each run; a point the
// rules drop never comes back, so the points dropped before need not be
// judged again.
func keep(p retention.Policy, locked time.Duration, kept []int, times []time.Time, loc *time.Location) []int {
	// Newest first, the order Verdicts sorts them into: its stable sort
	// then moves nothing, and verdict i is item i's.
	items := make([]retention.Item, len(kept))
	for i, run := range kept {
		items[len(kept)-1-i] = retention.Item{Time: times[run]}
	}
	now := times[kept[len(kept)-1]]
	out := make([]int, 0, len(kept))
	verdicts := retention.Verdicts(p, items, loc)
	for i := len(verdicts) - 1; i >= 0; i-- { // oldest first
		run := kept[len(kept)-1-i]
		if verdicts[i].Keep || times[run].Add(locked).After(now) {
			out = append(out, run)
		}
	}
	return out
}

// reach bounds how old a point the retention keeps can be, when the
// schedule runs as it says: each rule's buckets, each at least one gap
// of the schedule long, and the lock.
func reach(p retention.Policy, locked time.Duration, sc cron.Schedule) time.Duration {
	gap := policy.LongestGap(sc)
	r := max(locked, p.Within) + gap
	for _, rule := range []struct {
		n      int
		bucket time.Duration
	}{{p.Last, 0}, {p.Hourly, time.Hour}, {p.Daily, 24 * time.Hour}, {p.Weekly, 7 * 24 * time.Hour},
		{p.Monthly, 31 * 24 * time.Hour}, {p.Yearly, 366 * 24 * time.Hour}} {
		if rule.n > 0 {
			r = max(r, time.Duration(rule.n+1)*max(gap, rule.bucket))
		}
	}
	return r
}

// fleetSizes sums the model over the VMs for any kept points in
// O(points × log VMs): VMs sorted by the runs a whole rewrite takes
// (used ÷ change), with prefix sums, so that each gap between kept
// points splits them once into those it rewrote whole and the rest.
type fleetSizes struct {
	chunk float64
	// base is Σ used × reduction, baseUsed Σ used, maps the bytes of one
	// point's disk maps over the fleet.
	base, baseUsed, maps float64
	whole                []float64 // runs to rewrite each VM, ascending
	// Prefix sums over whole's order: used × reduction and used; suffix
	// sums: change × reduction and change.
	usedR, used, changeR, change []float64
}

func newFleetSizes(vms []CapacityVM, chunkSize int) *fleetSizes {
	fl := &fleetSizes{chunk: float64(chunkSize)}
	if chunkSize <= 0 {
		fl.chunk = DefaultChunkSize
	}
	sorted := append([]CapacityVM(nil), vms...)
	runs := func(v CapacityVM) float64 {
		if v.Change <= 0 {
			return math.Inf(1)
		}
		return v.Used / v.Change
	}
	sort.Slice(sorted, func(i, j int) bool { return runs(sorted[i]) < runs(sorted[j]) })
	n := len(sorted)
	fl.whole = make([]float64, n)
	fl.usedR, fl.used = make([]float64, n+1), make([]float64, n+1)
	fl.changeR, fl.change = make([]float64, n+1), make([]float64, n+1)
	for i, v := range sorted {
		fl.whole[i] = runs(v)
		fl.base += v.Used * v.Reduction
		fl.baseUsed += v.Used
		fl.maps += MapBytesPerChunk * math.Ceil(v.Used/fl.chunk)
		fl.usedR[i+1], fl.used[i+1] = fl.usedR[i]+v.Used*v.Reduction, fl.used[i]+v.Used
	}
	for i := n - 1; i >= 0; i-- {
		v := sorted[i]
		fl.changeR[i], fl.change[i] = fl.changeR[i+1]+v.Change*v.Reduction, fl.change[i+1]+v.Change
	}
	return fl
}

// size is the fleet's bytes with points kept at these runs.
func (fl *fleetSizes) size(kept []int) CapacitySize {
	data, unique := fl.base, fl.baseUsed
	for i := 1; i < len(kept); i++ {
		k := float64(kept[i] - kept[i-1])
		// VMs [0, j) were rewritten whole within the gap.
		j := sort.Search(len(fl.whole), func(x int) bool { return fl.whole[x] > k })
		data += fl.usedR[j] + k*fl.changeR[j]
		unique += fl.used[j] + k*fl.change[j]
	}
	return CapacitySize{Data: data, Points: len(kept),
		Metadata: float64(len(kept))*fl.maps + ChunkEntryBytes*unique/fl.chunk}
}

// growthPerRun is what one more run adds before any point is dropped.
func (fl *fleetSizes) growthPerRun() float64 {
	if len(fl.changeR) == 0 {
		return 0
	}
	return fl.changeR[0] + fl.maps + ChunkEntryBytes*fl.change[0]/fl.chunk
}

// Lookback is how far back a policy's first run matters to its
// forecast: older than that, the simulation resumes (First may be
// read from the catalog no further back).
func Lookback(in CapacityInput) time.Duration {
	if in.Schedule == nil {
		return capacityLongCycle
	}
	return reach(in.Retention, in.ImmutableFor, in.Schedule) + cycleOf(in.Retention, in.Schedule)
}

// cycleOf is the calendar's cycle for the retention's buckets: a year
// where months and years count (and to forecast a retention that keeps
// everything), four weeks for hours, days and weeks (cron schedules
// repeat weekly, apart from days of the month); keep-last and
// keep-within count runs and time, not buckets: a day, or the runs the
// retention keeps.
func cycleOf(p retention.Policy, sc cron.Schedule) time.Duration {
	switch {
	case p.Empty() || p.Monthly > 0 || p.Yearly > 0:
		return capacityLongCycle
	case p.Hourly > 0 || p.Daily > 0 || p.Weekly > 0:
		return capacityShortCycle
	}
	return max(24*time.Hour, time.Duration(p.Last+1)*policy.LongestGap(sc), p.Within)
}

// WhenFull is the first run at which the forecasts together have grown
// by more than free since now: the date a store with that much free
// space fills. Past the simulations, retentions that keep everything
// grow on at their rate. Zero: never (the steady states fit).
func WhenFull(fs []*CapacityForecast, now time.Time, free float64) time.Time {
	type step struct {
		at    time.Time
		i     int
		bytes float64
	}
	var steps []step
	cur := make([]float64, len(fs))
	var last time.Time
	for i, f := range fs {
		cur[i] = f.Now.Bytes()
		for _, s := range f.Sizes {
			if s.At.After(now) {
				steps = append(steps, step{s.At, i, s.Bytes()})
			}
		}
		if n := len(f.Sizes); n > 0 && f.Sizes[n-1].At.After(last) {
			last = f.Sizes[n-1].At
		}
	}
	sort.SliceStable(steps, func(a, b int) bool { return steps[a].at.Before(steps[b].at) })
	var grown float64
	for _, s := range steps {
		grown += s.bytes - cur[s.i]
		cur[s.i] = s.bytes
		if grown > free {
			return s.at
		}
	}
	var rate float64
	for _, f := range fs {
		if f.Steady.IsZero() {
			rate += f.GrowthPerDay
		}
	}
	days := (free - grown) / rate
	if rate <= 0 || last.IsZero() || days > capacityNever {
		return time.Time{}
	}
	return last.Add(time.Duration(days * float64(24*time.Hour)))
}

// capacityNever is how many days past its simulation a store filling
// up counts as never (a century; time.Duration ends at 292 years).
const capacityNever = 36525
