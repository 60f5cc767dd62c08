package main

import (
	"context"
	"fmt"
	"log"
	"math"
	"os"
	"text/tabwriter"
	"time"

	"github.com/coffer-backup/coffer/internal/engine/enginetest"
	"github.com/coffer-backup/coffer/internal/plan"
)

// planAccuracy holds the planner to what happens (-plan N): a first run
// of N VMs at concurrency 8 is recorded in a catalog, as the policy's
// history; then, for each -concurrency, the planner predicts the whole
// fleet's run from that history (the N VMs' own costs, the policy's mean
// for the others) before the engine runs it, and the measured time is
// set against the P50 and P90.
func (f *fleet) planAccuracy(ctx context.Context, n int) {
	cat := enginetest.NewCatalog()
	start := time.Now()
	cal := f.runRecorded(ctx, 8, n, cat)
	fmt.Printf("calibration: %d VMs at concurrency 8 in %s (mean snapshot %s, mean release %s)\n",
		n, round(time.Since(start)), round(cal.create), round(cal.release))
	hist, err := plan.ReadHistory(ctx, cat, "bench", 1)
	if err != nil {
		log.Fatal(err)
	}
	vms, err := f.conn.Inventory(ctx)
	if err != nil {
		log.Fatal(err)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "concurrency\tVMs\tP50\tP90\tmeasured\tvs P50\twithin P90\tplanning took\tbottleneck\t")
	var assumed []string
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
		r := f.run(ctx, c, f.o.vms)
		errPct := 100 * (r.elapsed.Seconds() - pred.P50.Seconds()) / pred.P50.Seconds()
		within := "yes"
		if r.elapsed > pred.P90 {
			within = "no"
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%+.0f%%\t%s\t%s\t%s\t\n", c, f.o.vms, round(pred.P50), round(pred.P90), round(r.elapsed),
			math.Round(errPct), within, round(planTook), pred.Bottleneck)
	}
	tw.Flush()
	fmt.Println("\nassumed where the calibration recorded nothing:")
	for _, a := range assumed {
		fmt.Println("  -", a)
	}
}
