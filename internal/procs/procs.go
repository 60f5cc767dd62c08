// Package procs sizes coffer's Go scheduler: two processors (Ps) per CPU
// while the process works, and one while it is nearly idle.
//
// Two per CPU (Init): coffer's data path spends much of its time in cgo
// (zstd) and in blocking system calls (source reads, O_DIRECT writes),
// and the Go scheduler counts a P as busy for the length of each: with
// one P per CPU, goroutines that had work (the readers, the other
// workers) waited for a P while a CPU sat idle. Measured on the 4 GiB
// benchmark image, 8 runs each: full backup 2.50 s median against
// 2.76 s, the same CPU time.
//
// One while idle (ShrinkWhenIdle, run by servers and workers): a server
// that leads a fleet of workers spends its time waiting for PostgreSQL,
// a few hundred microseconds of work per VM unit spread over the units'
// seconds, and a worker waits between its units. With several Ps, every
// goroutine made runnable while another runs wakes an idle P's thread,
// which spins looking for work and goes back to sleep (the runtime's
// wakep, a futex each way): on the 2-core development machine the
// leader of the 1,000-VM fleet benchmark used a sixth less CPU with
// server and workers shrinking (docs/benchmarks-fleet.md, round 12). Go's runtime has no
// such setting, and no library we know of sizes GOMAXPROCS to load
// (automaxprocs and Go's own default follow the CPU quota): this is
// coffer's own.
//
// GOMAXPROCS in the environment overrides both.
package procs

import (
	"os"
	"runtime"
)

// Init gives the process two Ps per CPU, unless GOMAXPROCS is set in the
// environment. cmd/coffer calls it first thing, and so do the test
// binaries that run as coffer.
func Init() {
	if !operatorChose() {
		runtime.GOMAXPROCS(2 * runtime.GOMAXPROCS(0))
	}
}

// operatorChose says whether GOMAXPROCS is set in the environment, which
// Init and ShrinkWhenIdle then leave alone.
func operatorChose() bool { return os.Getenv("GOMAXPROCS") != "" }

// Working is how many Ps the process works with: GOMAXPROCS, or, while
// ShrinkWhenIdle holds an idle process on one, the number it gives back
// as soon as work starts. Whatever sizes itself by the processors (a
// backup's workers, the planner's assumed pipeline) asks this rather
// than runtime.GOMAXPROCS, which would size it by idleness.
func Working() int {
	if n := working.Load(); n > 0 {
		return int(n)
	}
	return runtime.GOMAXPROCS(0)
}
