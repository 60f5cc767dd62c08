// Command coffer is agentless backup and recovery for virtual machines.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/coffer-backup/coffer/internal/cli"
	"github.com/coffer-backup/coffer/internal/procs"
)

func main() {
	// Two Go Ps per CPU (package procs says why).
	procs.Init()
	// The first Ctrl-C cancels the context: commands stop cleanly (commit
	// what they stored, release hypervisor snapshots). A second one kills.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	os.Exit(cli.Execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
