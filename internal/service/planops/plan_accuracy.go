package planops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"context"
	"math"
	"sort"

	"github.com/coffer-backup/coffer/internal/api"
)

// PlanAccuracy sets the prediction each of a policy's last runs recorded
// as it started (its "plan" event) beside the time the run took, from its
// first VM's start to its last VM's end: the planner held to its record.
// Runs without a prediction (before the planner, or when it failed) are
// left out.
func (s Ops) PlanAccuracy(ctx context.Context, in *api.PlanAccuracyInput) (*api.PlanAccuracy, error) {
	docs, err := s.accuracies(ctx, in.Runs, in.Policy)
	if err != nil {
		return nil, err
	}
	return &docs[0], nil
}

// PlanAccuracies is PlanAccuracy for every policy of the configuration,
// each over its own last runs: the dashboard's record of the planner,
// and `coffer plan accuracy` without a policy. Policies without a
// predicted run are named apart.
func (s Ops) PlanAccuracies(ctx context.Context, in *api.PlanAccuraciesInput) (*api.PlanAccuracies, error) {
	docs, err := s.accuracies(ctx, in.Runs, "")
	if err != nil {
		return nil, err
	}
	out := &api.PlanAccuracies{Policies: []api.PlanAccuracy{}, Unpredicted: []string{}}
	for _, d := range docs {
		if len(d.Runs) == 0 {
			out.Unpredicted = append(out.Unpredicted, d.Policy)
		} else {
			out.Policies = append(out.Policies, d)
		}
	}
	return out, nil
}

// accuracies sums up the last runs of the policy named, or of every
// policy by name when only is "".
func (s Ops) accuracies(ctx context.Context, runs int, only string) ([]api.PlanAccuracy, error) {
	runs, err := accuracyRuns(runs)
	if err != nil {
		return nil, err
	}
	cfg, _, err := s.PolicyConfig(ctx)
	if err != nil {
		return nil, err
	}
	var names []string
	if only != "" {
		if _, ok := cfg.Policy(only); !ok {
			return nil, service.Invalidf("no policy named %q (`coffer policy check` lists them)", only)
		}
		names = []string{only}
	} else {
		for _, p := range cfg.Policies {
			names = append(names, p.Name)
		}
		sort.Strings(names)
	}
	cat, err := s.OpenCatalog(ctx)
	if err != nil {
		return nil, err
	}
	defer cat.Close()
	out := make([]api.PlanAccuracy, 0, len(names))
	for _, name := range names {
		bts, err := backtests(ctx, cat, name, runs)
		if err != nil {
			return nil, err
		}
		out = append(out, *accuracyOf(name, bts))
	}
	return out, nil
}

// accuracyRuns checks the runs asked for; 0 is 20.
func accuracyRuns(runs int) (int, error) {
	if runs < 0 || runs > 1000 {
		return 0, service.Invalidf("runs: give 0 (20) to 1000")
	}
	if runs == 0 {
		runs = 20
	}
	return runs, nil
}

// accuracyOf sums a policy's backtests up: the mean absolute error, the
// bias and the share within P90.
func accuracyOf(policyName string, bts []api.PlanBacktest) *api.PlanAccuracy {
	doc := &api.PlanAccuracy{Policy: policyName, Runs: append([]api.PlanBacktest{}, bts...)}
	within := 0
	for _, r := range doc.Runs {
		doc.MeanAbsError += math.Abs(r.Error)
		doc.Bias += r.Error
		if r.MeasuredSeconds <= r.P90Seconds {
			within++
		}
	}
	if n := float64(len(doc.Runs)); n > 0 {
		doc.MeanAbsError, doc.Bias, doc.WithinP90 = doc.MeanAbsError/n, doc.Bias/n, float64(within)/n
	}
	return doc
}
