// Package planacc holds internal/plan to real runs, for the benchmarks
// that do it (bench/vsphere -plan, bench/planfleet): calibration runs,
// recorded in one catalog as the policy's history, at several
// concurrencies so that the planner can fit how the costs grow with
// concurrency and how much whole runs vary; then each run of the whole
// fleet is predicted from that history before it starts, and its measured
// time set against the P50 and P90. Each run then joins the history, as
// the catalog records every real run (Options.Learn): the next
// prediction reads the calibration and the fleet's runs before it. The
// issue's targets: within 15% of the P50, and at least 90% of the runs
// inside the P90.
package planacc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"math"
	"os"
	"time"

	"github.com/coffer-backup/coffer/bench/benchutil"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine/enginetest"
	"github.com/coffer-backup/coffer/internal/plan"
)

// Fleet is what a benchmark protects.
type Fleet interface {
	// Run backs up the first n VMs at concurrency c through the engine,
	// recording into cat, and returns the time it took and a note for
	// the calibration's line.
	Run(ctx context.Context, c, n int, cat *enginetest.Catalog) (time.Duration, string)
	// Input is the planner's input for the whole fleet at concurrency c,
	// from hist, and the assumptions it made.
	Input(ctx context.Context, c int, hist *plan.History) (plan.Input, []string)
}

// Options are the calibration and the runs.
type Options struct {
	// CalibrationVMs VMs at each of Levels, Repeats times each.
	CalibrationVMs, Repeats int
	Levels                  []int
	// VMs is the whole fleet, run Runs times at each of Concurrency.
	VMs, Runs   int
	Concurrency []int
	// Policy is the policy's name the runs are recorded under.
	Policy string
	// RecordFile keeps the planner's record (measured ÷ P50 of each run,
	// newest first) from one invocation to the next, as the catalog keeps
	// it for real runs; "": the record starts empty.
	RecordFile string
	// Learn records the whole fleet's runs in the policy's history too,
	// as the catalog records every real run: each prediction then reads
	// the policy's last HistoryJobs runs (the service's default), the
	// calibration's and the fleet's before it. Without it every run is
	// predicted from the calibration alone.
	Learn bool
}

// HistoryJobs is the runs of the policy the service's planner reads
// (service.Plan's default).
const HistoryJobs = 20

// Result is the share of runs that met each target.
type Result struct {
	Runs, WithinP50, InsideP90 int
}

// Run calibrates, then predicts and runs, printing a row per run as it
// ends, and the assumptions the planner made.
func Run(ctx context.Context, f Fleet, o Options) Result {
	cat := enginetest.NewCatalog()
	// Round after round over the levels, not a level's repeats back to
	// back: the runs' spread around the growth's fit is the planner's
	// run-to-run factor, and two runs a minute apart agree with each
	// other better than with a run made later under another load.
	for round := range o.Repeats {
		for _, c := range o.Levels {
			took, note := f.Run(ctx, c, o.CalibrationVMs, cat)
			fmt.Printf("calibration round %d: %d VMs at concurrency %d in %s (%s; load %s)\n", round+1, o.CalibrationVMs, c, Round(took), note, benchutil.LoadAverage())
			printPhases(ctx, cat, newestJob(ctx, cat))
		}
	}
	hist := readHistory(ctx, cat, o.Policy, len(o.Levels)*o.Repeats)
	for _, r := range hist.Runs {
		fmt.Printf("  recorded run: peak %d in flight, %.1f on average, %.3f s of fixed costs per VM, %.3g s of transfer per MB\n",
			r.Concurrency, r.Load, r.FixedSeconds, r.TransferSecondsPerByte*1e6)
	}
	// Each row as its run ends (the whole table takes minutes).
	const row = "%11v  %4v  %8v  %8v  %8v  %8v  %6v  %10v  %13v  %12v  %-38v  %v\n"
	fmt.Printf(row, "concurrency", "VMs", "P50", "sim P90", "P90", "measured", "vs P50", "within P90", "planning took", "load average", "P90 from", "bottleneck")
	var assumed []string
	var res Result
	rec := readRecord(o.RecordFile)
	for _, c := range o.Concurrency {
		for range o.Runs {
			if o.Learn {
				hist = readHistory(ctx, cat, o.Policy, HistoryJobs)
			}
			in, as := f.Input(ctx, c, hist)
			assumed = as
			planStart := time.Now()
			pred, err := plan.Predict(in)
			if err != nil {
				log.Fatal(err)
			}
			planTook := time.Since(planStart)
			// The P90 widened by the earlier runs' record, as the service
			// does with the catalog's (plan.ApplyRecord).
			plan.ApplyRecord(pred, plan.Record{Scope: "policy " + o.Policy, Ratios: rec})
			runCat := cat
			if !o.Learn {
				runCat = enginetest.NewCatalog()
			}
			elapsed, _ := f.Run(ctx, c, o.VMs, runCat)
			rec = append([]float64{elapsed.Seconds() / pred.P50.Seconds()}, rec[:min(len(rec), recordRuns-1)]...)
			writeRecord(o.RecordFile, rec)
			off := (elapsed.Seconds() - pred.P50.Seconds()) / pred.P50.Seconds()
			within := "yes"
			if elapsed > pred.P90 {
				within = "no"
			} else {
				res.InsideP90++
			}
			if math.Abs(off) <= 0.15 {
				res.WithinP50++
			}
			res.Runs++
			basis := fmt.Sprintf("no record (%d runs)", len(rec)-1)
			if r := pred.Record; r != nil {
				basis = fmt.Sprintf("record of %d: median %.2f, factor %.2f", r.Runs, r.Median, r.Factor)
			}
			fmt.Printf(row, c, o.VMs, Round(pred.P50), Round(pred.SimulatedP90), Round(pred.P90), Round(elapsed),
				fmt.Sprintf("%+.0f%%", math.Round(100*off)), within, Round(planTook), benchutil.LoadAverage(), basis, pred.Bottleneck)
			fixedFit, _ := hist.CostGrowth()
			transferFit, _ := hist.TransferGrowth()
			printCosts(ctx, runCat, o.Policy, fixedFit, transferFit)
		}
	}
	fmt.Printf("\nwithin 15%% of P50: %d of %d runs; inside P90: %d of %d runs\n", res.WithinP50, res.Runs, res.InsideP90, res.Runs)
	fmt.Println("\nthe planner's assumptions (the last prediction's):")
	for _, a := range assumed {
		fmt.Println("  -", a)
	}
	return res
}

// readHistory reads the policy's last jobs runs from the catalog.
func readHistory(ctx context.Context, cat *enginetest.Catalog, policy string, jobs int) *plan.History {
	hist, err := plan.ReadHistory(ctx, cat, policy, jobs)
	if err != nil {
		log.Fatal(err)
	}
	return hist
}

// newestJob is the ID of the run just recorded (0: none).
func newestJob(ctx context.Context, cat *enginetest.Catalog) int64 {
	jobs, err := cat.ListJobs(ctx, catalog.JobFilter{Limit: 1})
	if err != nil || len(jobs) == 0 {
		return 0
	}
	return jobs[0].ID
}

// printCosts sets the run's own recorded costs beside what the fit its
// prediction used says of them at the load the run's tasks had: where
// a prediction went wrong, this says whether the tasks themselves cost
// more than at the same load in the calibration, or the simulation put
// them together differently.
func printCosts(ctx context.Context, cat *enginetest.Catalog, policy string, fixed, transfer plan.CostGrowth) {
	h, err := plan.ReadHistory(ctx, cat, policy, 1)
	if err != nil || len(h.Runs) == 0 {
		return
	}
	r := h.Runs[0]
	printPhases(ctx, cat, r.JobID)
	fmt.Printf("%13s its tasks: %.1f in flight on average, %.3f s of fixed costs per VM (fit: %.3f), %.3g s of transfer per MB (fit: %.3g)\n",
		"", r.Load, r.FixedSeconds, fixed.Base*fixed.Factor(r.Load), r.TransferSecondsPerByte*1e6, transfer.Base*transfer.Factor(r.Load)*1e6)
}

// recordRuns is the record the service reads of a policy (its last 20).
const recordRuns = 20

// readRecord reads the record a previous invocation left; none when the
// file does not exist yet.
func readRecord(path string) []float64 {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		log.Fatal(err)
	}
	var rec []float64
	if err := json.Unmarshal(b, &rec); err != nil {
		log.Fatalf("%s: %v", path, err)
	}
	return rec
}

// writeRecord replaces the record file (atomically: a run interrupted
// keeps the previous record).
func writeRecord(path string, rec []float64) {
	if path == "" {
		return
	}
	b, err := json.Marshal(rec)
	if err != nil {
		log.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		log.Fatal(err)
	}
}

// Round prints a duration as the tables do.
func Round(d time.Duration) string {
	switch {
	case d >= time.Minute:
		return fmt.Sprintf("%.1fmin", d.Minutes())
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	}
	return d.Round(time.Millisecond).String()
}

// printPhases breaks a run's mean fixed cost per VM down by phase. On
// the QEMU fleet the phases of a calibration run of 24 VMs at 24 in
// flight took half as long as those of the whole fleet's runs at 24: all
// its snapshots are taken together before any transfer starts, where the
// fleet's second wave takes them beside 23 transfers using the cores.
func printPhases(ctx context.Context, cat *enginetest.Catalog, job int64) {
	evs, err := cat.ListEvents(ctx, catalog.EventFilter{JobID: job})
	if err != nil {
		return
	}
	var create, remove, setup, rest float64
	var tasks int
	for _, e := range evs {
		switch e.Kind {
		case "snapshot-create":
			create += benchutil.Number(e.Fields["seconds"])
		case "snapshot-remove":
			remove += benchutil.Number(e.Fields["seconds"])
		case "task-done":
			tasks++
			setup += benchutil.Number(e.Fields["setup_seconds"])
			rest += benchutil.Number(e.Fields["seconds"]) - benchutil.Number(e.Fields["transfer_seconds"]) - benchutil.Number(e.Fields["setup_seconds"])
		}
	}
	if tasks == 0 {
		return
	}
	rest -= create + remove
	n := float64(tasks)
	fmt.Printf("%13s its fixed costs per VM: snapshot create %.3f s, setup %.3f s, snapshot remove %.3f s, the rest %.3f s\n", "", create/n, setup/n, remove/n, rest/n)
}
