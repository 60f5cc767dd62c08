package plan

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/coffer-backup/coffer/internal/plan/fit"
)

// The planner held to its record. Every real run records its P50 beside
// the time it took (`coffer plan accuracy`); the ratio of the two is the
// whole run's error, whatever caused it: the spread of the VMs' costs
// that the simulation already draws, and also what it cannot see: the
// machine's load moving between the runs the costs were learned from and
// the run predicted, or a bias of the model. The simulation's P90 carries
// only the first; the record carries all of them.

// Record is the measured time ÷ P50 of past runs, the newest first.
type Record struct {
	// Scope says whose runs: "policy NAME" or "the catalog (all policies)".
	Scope  string
	Ratios []float64
}

// MinRecordRuns is the fewest recorded runs the P90 is widened from: with
// four, the t quantile is already 1.64 deviations, and the 90th
// percentile of fewer is their largest.
const MinRecordRuns = 5

// RecordSpread is what the record made of the P90.
type RecordSpread struct {
	Scope string
	Runs  int
	// Median is the runs' median measured ÷ P50: their bias.
	Median float64
	// Empirical90 is the ratios' 90th percentile (interpolated), Bound90
	// the upper 90% prediction bound of one more run's ratio, from the
	// logs' mean and deviation with Student's t at Runs−1 degrees of
	// freedom: exp(m + t₀.₉·s·sqrt(1+1/n)). Factor is the larger.
	Empirical90, Bound90, Factor float64
	// logMean and logScale give the bound's t distribution, for the
	// chance to end within the window.
	logMean, logScale float64
}

// Spread reads the record; false when it holds fewer than MinRecordRuns
// usable ratios.
func (r Record) Spread() (RecordSpread, bool) {
	ratios := r.usable()
	logs := make([]float64, len(ratios))
	for i, v := range ratios {
		logs[i] = math.Log(v)
	}
	n := len(logs)
	if n < MinRecordRuns {
		return RecordSpread{}, false
	}
	sort.Float64s(ratios)
	m := 0.0
	for _, x := range logs {
		m += x
	}
	m /= float64(n)
	ss := 0.0
	for _, x := range logs {
		ss += (x - m) * (x - m)
	}
	scale := math.Sqrt(ss/float64(n-1)) * math.Sqrt(1+1/float64(n))
	rs := RecordSpread{Scope: r.Scope, Runs: n, Median: percentile(ratios, 0.5), Empirical90: percentile(ratios, 0.9),
		Bound90: math.Exp(m + fit.StudentQuantile(0.9, float64(n-1))*scale), logMean: m, logScale: scale}
	rs.Factor = max(rs.Empirical90, rs.Bound90)
	return rs, true
}

// usable are the ratios a run can have: positive and finite.
func (r Record) usable() []float64 {
	var out []float64
	for _, v := range r.Ratios {
		if v > 0 && !math.IsInf(v, 1) && !math.IsNaN(v) {
			out = append(out, v)
		}
	}
	return out
}

// inWindow is the record's chance that a run predicted at p50 ends
// within w: P(p50 · ratio ≤ w) under the bound's t distribution.
func (rs RecordSpread) inWindow(p50, w time.Duration) float64 {
	if p50 <= 0 {
		return 1
	}
	x := math.Log(w.Seconds()/p50.Seconds()) - rs.logMean
	if rs.logScale == 0 {
		if x >= 0 {
			return 1
		}
		return 0
	}
	return fit.StudentCDF(x/rs.logScale, float64(rs.Runs-1))
}

// ApplyRecord widens a prediction by the planner's record. The P90 is
// the larger of the simulation's and P50 × the record's factor, not a
// combination of both spreads: the recorded runs were real, so their
// ratios already hold the costs' spread that the simulation draws, and
// adding the two would count it twice. The simulation's P90 stays when
// it is the wider (a fleet whose VMs vary more than those of the
// recorded runs). The chance to end within the window is likewise the
// smaller of the two. The P50 is left as simulated: the record's median
// is reported beside it, as its bias.
func ApplyRecord(p *Prediction, r Record) {
	p.SimulatedP90 = p.P90
	p.Record = nil
	rs, ok := r.Spread()
	if !ok {
		p.RecordNote = recordMissing(r)
		return
	}
	p.Record = &rs
	p.RecordNote = ""
	p.P90 = max(p.P90, seconds(p.P50.Seconds()*rs.Factor))
	if p.Window > 0 {
		p.InWindow = min(p.InWindow, rs.inWindow(p.P50, p.Window))
	}
}

func recordMissing(r Record) string {
	what := "no run recorded with its prediction"
	if n := len(r.usable()); n > 0 {
		runs := "runs"
		if n == 1 {
			runs = "run"
		}
		what = fmt.Sprintf("%d %s recorded with a prediction in %s, fewer than %d", n, runs, r.Scope, MinRecordRuns)
	}
	return what
}

// P90Basis says what the P90 carries.
func (p *Prediction) P90Basis() string {
	if rs := p.Record; rs != nil {
		which := "the record's"
		if p.P90 == p.SimulatedP90 {
			which = "the simulation's, wider than the record's"
		}
		return fmt.Sprintf("P90 %s is %s: %d runs of %s took %.2f× their P50 at the median; 90th percentile %.2f×, "+
			"Student-t bound %.2f× (%d degrees of freedom); the simulation alone gave %s.",
			p.P90.Round(time.Millisecond), which, rs.Runs, rs.Scope, rs.Median, rs.Empirical90, rs.Bound90, rs.Runs-1,
			p.SimulatedP90.Round(time.Millisecond))
	}
	note := p.RecordNote
	if note == "" {
		note = "no record read"
	}
	return fmt.Sprintf("The P90 carries only the spread of the recorded task costs (%s): not how the machine may move between the recorded runs and this one.", note)
}
