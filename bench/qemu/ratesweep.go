package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/coffer-backup/coffer/internal/guestvm"
)

// The trade-off behind the throttle's targets (issue 17): full backups at
// fixed read rates (limits: rate), each round beside an unlimited one,
// with the guest writing. For each rate: the backup's time against the
// unlimited backup's, and the guest's write latency against idle. A
// controller can only choose among these points (the rate it holds is
// what sets both figures), so if no fixed rate meets both targets, no
// controller can on this machine; if one does, the controller's tuning
// should find it.

type sweepRow struct {
	rate           string
	seconds, guest []float64 // per round
}

func rateSweep(ctx context.Context, vm *guestvm.VM, bin, dir string, env []string, idle lat, rates []string, rounds int) {
	plain := filepath.Join(dir, "sweep-unlimited.yaml")
	must(os.WriteFile(plain, []byte(fullPolicy(vm)), 0o644))
	rows := []*sweepRow{{rate: "unlimited"}}
	cfgs := []string{plain}
	for _, r := range rates {
		cfg := filepath.Join(dir, "sweep-"+r+".yaml")
		must(os.WriteFile(cfg, []byte(fullPolicy(vm)+fmt.Sprintf("limits:\n  rate: %s\n", r)), 0o644))
		rows = append(rows, &sweepRow{rate: r})
		cfgs = append(cfgs, cfg)
	}
	for round := range rounds {
		for i, cfg := range cfgs {
			run := fullUnder(ctx, vm, bin, dir, env, cfg, fmt.Sprintf("sweep-%d-%d", round, i))
			rows[i].seconds = append(rows[i].seconds, run.seconds)
			rows[i].guest = append(rows[i].guest, float64(run.guest.avg)/float64(idle.avg))
		}
	}
	base := median(rows[0].seconds)
	fmt.Printf("\nfixed read rates, full backups through the engine, guest writing (idle avg %d us), medians of %d rounds\n", idle.avg, rounds)
	fmt.Printf("%-12s %9s %16s %12s %8s\n", "rate", "seconds", "x unlimited time", "guest x idle", "both")
	for _, r := range rows {
		sec, g := median(r.seconds), median(r.guest)
		both := "no"
		if sec <= 1.5*base && g <= 2 {
			both = "yes"
		}
		fmt.Printf("%-12s %9.1f %15.2fx %11.2fx %8s\n", r.rate, sec, sec/base, g, both)
	}
	fmt.Printf("targets: time at most 1.5x the unlimited backup's, guest latency within 2x idle\n")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
