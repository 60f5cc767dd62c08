package main

import (
	"context"
	"fmt"
	"log"
	"math"
	"time"

	"github.com/coffer-backup/coffer/bench/benchutil"
	"github.com/coffer-backup/coffer/internal/engine/enginetest"
	"github.com/coffer-backup/coffer/internal/plan"
)

// planOptions are the accuracy run's (-plan N): calibration runs of N
// VMs at each of levels, repeats times each, recorded in one catalog as
// the policy's history; then each -concurrency run of the whole fleet,
// runs times.
type planOptions struct {
	vms, repeats, runs int
	levels             []int
}

// planAccuracy holds the planner to what happens: the calibration runs
// are the policy's history (their costs at the concurrencies they ran
// at, from which the planner fits how the fixed costs grow, and their
// spread, the run-to-run factor); then, for each -concurrency, the
// planner predicts the whole fleet's run from that history (the
// calibrated VMs' own costs, the policy's mean for the others) before
// the engine runs it, and the measured time is set against the P50 and
// P90.
func (f *fleet) planAccuracy(ctx context.Context, po planOptions) {
	cat := enginetest.NewCatalog()
	for _, c := range po.levels {
		for range po.repeats {
			start := time.Now()
			cal := f.runRecorded(ctx, c, po.vms, cat)
			fmt.Printf("calibration: %d VMs at concurrency %d in %s (mean snapshot %s, mean release %s; %s)\n",
				po.vms, c, round(time.Since(start)), round(cal.create), round(cal.release), "load "+benchutil.LoadAverage())
		}
	}
	hist, err := plan.ReadHistory(ctx, cat, "bench", len(po.levels)*po.repeats)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range hist.Runs {
		fmt.Printf("  recorded run: peak %d in flight, %.1f on average, %.3f s of fixed costs per VM\n", r.Concurrency, r.Load, r.FixedSeconds)
	}
	vms, err := f.conn.Inventory(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// Each row as its run ends (the whole table takes minutes).
	const row = "%11v  %4v  %8v  %8v  %8v  %6v  %10v  %13v  %12v  %v\n"
	fmt.Printf(row, "concurrency", "VMs", "P50", "P90", "measured", "vs P50", "within P90", "planning took", "load average", "bottleneck")
	var assumed []string
	inside, total := 0, 0
	for _, c := range f.o.concurrency {
		p := f.policy(f.o.vms)
		in, as := plan.BuildInput(plan.Sources{Config: f.config(c), Policy: p, Targets: plan.Selected(p, "vc", vms), History: hist})
		assumed = as
		planStart := time.Now()
		pred, err := plan.Predict(in)
		if err != nil {
			log.Fatal(err)
		}
		planTook := time.Since(planStart)
		for range po.runs {
			r := f.run(ctx, c, f.o.vms)
			errPct := 100 * (r.elapsed.Seconds() - pred.P50.Seconds()) / pred.P50.Seconds()
			within := "yes"
			if r.elapsed > pred.P90 {
				within = "no"
			} else {
				inside++
			}
			total++
			fmt.Printf(row, c, f.o.vms, round(pred.P50), round(pred.P90), round(r.elapsed),
				fmt.Sprintf("%+.0f%%", math.Round(errPct)), within, round(planTook), benchutil.LoadAverage(), pred.Bottleneck)
		}
	}
	fmt.Printf("\ninside P90: %d of %d runs\n", inside, total)
	fmt.Println("\nassumed where the calibration recorded nothing:")
	for _, a := range assumed {
		fmt.Println("  -", a)
	}
}
