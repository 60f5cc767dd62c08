package plan

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/plan/fit"
)

// Request is a plan to make: a policy's scenario as configured, and the
// what-ifs to set beside it.
type Request struct {
	Scenario   Scenario
	Variations []Variation
	Measured   Measurements
	Mode       string // "" : the policy's mode
	Window     time.Duration
	Runs       int
	Seed       uint64
	// Volume, when set, is every datastore's queue depth and active
	// commands per VM, for the VMs-per-volume rule.
	Volume Volume
	// Record is the planner's record of past runs, which widens every
	// scenario's P90 (record.go).
	Record Record
}

// Outcome is one scenario's prediction.
type Outcome struct {
	Name       string
	Prediction *Prediction
	Violations []Violation
}

// Report is a plan: the scenario as configured first, then each what-if.
type Report struct {
	Outcomes    []Outcome
	Assumptions []string
	// Concurrency is the recommendation from the recorded runs; nil when
	// they were at fewer than three concurrencies.
	Concurrency *Recommendation
}

// Make predicts the scenario and each variation of it.
func Make(r Request) (*Report, error) {
	rep := &Report{}
	scenarios := []struct {
		name string
		sc   Scenario
	}{{"as configured", r.Scenario}}
	for _, v := range r.Variations {
		sc, err := v.Apply(r.Scenario)
		if err != nil {
			return nil, err
		}
		scenarios = append(scenarios, struct {
			name string
			sc   Scenario
		}{v.Text, sc})
	}
	for i, s := range scenarios {
		in, as := BuildInput(Sources{Config: s.sc.Config, Policy: s.sc.Policy, Targets: s.sc.Targets, History: s.sc.History,
			Measured: r.Measured, Mode: r.Mode, Window: r.Window, Workers: s.sc.Workers})
		in.Runs, in.Seed, in.Record = r.Runs, r.Seed, r.Record
		if i == 0 {
			rep.Assumptions = as
		}
		p, err := Predict(in)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		rep.Outcomes = append(rep.Outcomes, Outcome{Name: s.name, Prediction: p, Violations: CheckRules(ruleInput(in, p, r.Volume))})
	}
	if h := r.Scenario.History; h != nil {
		rep.Concurrency = Recommend(h.Runs, r.Scenario.Config.Limits.WithDefaults().Tasks)
	}
	return rep, nil
}

// ruleInput is what the rules need of a predicted run.
func ruleInput(in Input, p *Prediction, vol Volume) RuleInput {
	ri := RuleInput{Pools: map[string]int{}, Peaks: p.Peaks, VMsPerDatastore: map[string]int{}, Volumes: map[string]Volume{}}
	for _, t := range in.Tasks {
		seen := map[string]bool{}
		for _, n := range t.Pools {
			ri.Pools[n.Key] = n.Cap
			if strings.HasPrefix(n.Key, "datastore:") && !seen[n.Key] {
				seen[n.Key] = true
				ri.VMsPerDatastore[n.Key]++
				if vol.QueueDepth > 0 {
					ri.Volumes[n.Key] = vol
				}
			}
		}
	}
	return ri
}

// Recommendation is the concurrency the recorded runs suggest.
type Recommendation struct {
	Fit        fit.USL
	Points     []fit.Throughput // VMs per second at each concurrency reached
	Configured int
	// Recommended is the knee when there is one, else the concurrency
	// reaching 90% of the throughput's ceiling; 0 when the runs scale
	// linearly (no limit seen yet).
	Recommended int
	Warning     string
}

// Recommend fits the Universal Scalability Law to the recorded runs'
// VMs per second at the concurrency each reached.
func Recommend(runs []RunRecord, configured int) *Recommendation {
	var pts []fit.Throughput
	for _, r := range runs {
		if r.VMs > 0 && r.Concurrency > 0 && r.Elapsed > 0 {
			pts = append(pts, fit.Throughput{Concurrency: r.Concurrency, Rate: float64(r.VMs) / r.Elapsed.Seconds()})
		}
	}
	u, err := fit.USLOf(pts)
	if err != nil {
		return nil
	}
	sort.Slice(pts, func(i, j int) bool { return pts[i].Concurrency < pts[j].Concurrency })
	rec := &Recommendation{Fit: u, Points: pts, Configured: configured}
	switch {
	case u.Knee() > 0:
		rec.Recommended = u.Knee()
		if configured > rec.Recommended {
			rec.Warning = fmt.Sprintf("limits.tasks %d is past the knee at %d: more tasks in flight lower the throughput (contention σ %.3f, coherency κ %.5f)",
				configured, rec.Recommended, u.Sigma, u.Kappa)
		}
	case u.Sigma > 0:
		// λN/(1+σ(N−1)) = 0.9·λ/σ  ⇔  N = 9(1−σ)/σ.
		rec.Recommended = max(1, int(9*(1-u.Sigma)/u.Sigma+0.5))
		if configured > rec.Recommended {
			rec.Warning = fmt.Sprintf("limits.tasks %d is past %d, where the throughput reaches 90%% of its ceiling: the tasks beyond add little (contention σ %.3f)",
				configured, rec.Recommended, u.Sigma)
		}
	}
	return rec
}
