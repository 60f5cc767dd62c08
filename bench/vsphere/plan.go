package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/coffer-backup/coffer/internal/engine/enginetest"
	"github.com/coffer-backup/coffer/internal/plan"
)

// planFleet is the simulated vCenter's fleet as bench/planacc runs it
// (-plan N): calibration runs of N VMs at -plan-calibrate, then the whole
// fleet at each -concurrency, predicted from the calibration and the
// fleet's runs before it (the VMs' own recorded costs, the policy's mean
// for VMs never run; -plan-learn=false: the calibration alone).
type planFleet struct{ f *fleet }

func (p planFleet) Run(ctx context.Context, c, n int, cat *enginetest.Catalog) (time.Duration, string) {
	r := p.f.runRecorded(ctx, c, n, cat)
	return r.elapsed, fmt.Sprintf("mean snapshot %s, mean release %s", round(r.create), round(r.release))
}

func (p planFleet) Input(ctx context.Context, c int, hist *plan.History) (plan.Input, []string) {
	vms, err := p.f.conn.Inventory(ctx)
	if err != nil {
		log.Fatal(err)
	}
	pol := p.f.policy(p.f.o.vms)
	return plan.BuildInput(plan.Sources{Config: p.f.config(c), Policy: pol, Targets: plan.Selected(pol, "vc", vms), History: hist})
}
