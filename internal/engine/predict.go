package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/policy"
)

// Selected is a VM a run selected, on its connection.
type Selected struct {
	Connection string
	VM         hypervisor.VM
}

// Prediction is a run's predicted duration, from its first VM's start to
// its last VM's end.
type Prediction struct {
	P50, P90   time.Duration
	Bottleneck string
}

// Predictor predicts a run from its configuration and selection
// (internal/plan, wired by the service: the engine cannot import the
// planner, which simulates with the engine's pools).
type Predictor func(ctx context.Context, cfg *policy.Config, p policy.Policy, selected []Selected) (Prediction, error)

// PredictTimeout bounds the prediction a run makes as it starts.
const PredictTimeout = 30 * time.Second

// predict records, as the run's VMs start, what the planner expects of
// it: the "plan" event that `coffer plan accuracy` sets beside what
// happened. A prediction that fails is a warning; the run goes on.
func (j *Job) predict(targets []target) {
	if j.e.o.Predict == nil {
		return
	}
	ctx, cancel := context.WithTimeout(j.ctx, PredictTimeout)
	defer cancel()
	sel := make([]Selected, len(targets))
	for i, t := range targets {
		sel[i] = Selected{t.conn, t.vm}
	}
	p, err := j.e.o.Predict(ctx, j.s.cfg, j.p, sel)
	if err != nil {
		j.event("warn", "plan", fmt.Sprintf("no prediction of this run: %v", err), nil)
		return
	}
	j.event("info", "plan", fmt.Sprintf("predicted for %d VMs: P50 %s, P90 %s; %s", len(sel), p.P50.Round(time.Millisecond), p.P90.Round(time.Millisecond), p.Bottleneck),
		map[string]any{"p50_seconds": p.P50.Seconds(), "p90_seconds": p.P90.Seconds(), "vms": len(sel)})
}
