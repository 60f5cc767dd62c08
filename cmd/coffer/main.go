// Command coffer is agentless backup and recovery for virtual machines.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/coffer-backup/coffer/internal/cli"
)

func main() {
	// Two Go Ps per CPU. coffer's data path spends much of its time in
	// cgo (zstd) and in blocking system calls (source reads, O_DIRECT
	// writes), and the Go scheduler counts a P as busy for the length of
	// each: with one P per CPU, goroutines that have work (the readers,
	// the other workers) waited for a P while a CPU sat idle. Measured on
	// the 4 GiB benchmark image, 8 runs each: full backup 2.50 s median
	// against 2.76 s, the same CPU time. GOMAXPROCS in the environment
	// still decides.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(2 * runtime.GOMAXPROCS(0))
	}
	// The first Ctrl-C cancels the context: commands stop cleanly (commit
	// what they stored, release hypervisor snapshots). A second one kills.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	os.Exit(cli.Execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
