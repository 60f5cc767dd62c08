package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Every wait of this benchmark has a deadline and names what it waited
// for, and a benchmark that is stopped (a deadline, an error, SIGINT or
// SIGTERM) kills its guest and its child processes and removes its work
// directory before it exits. Why: a run once sat for 15 minutes, printing
// nothing, with its guest running, until it was killed by hand (issue 42):
// the incremental's QMP client stayed connected to the guest's test
// monitor, which serves one client at a time, so the production-protection
// comparison's qmp.Dial on that monitor waited for a greeting under the
// run's one-hour context.

// Deadlines of the waits. Generous for a TCG guest on a loaded 2-core
// machine; each only bounds a wait that would otherwise never end.
const (
	bootDeadline    = 10 * time.Minute // the guest's "COFFER READY"
	windowDeadline  = 2 * time.Minute  // one latency window of the guest's writer
	monitorDeadline = 30 * time.Second // a QMP greeting or one command
	commandDeadline = 30 * time.Minute // one coffer, nbdcopy or qemu-img run
)

var (
	cleanupMu sync.Mutex
	cleanups  []func()
)

// atExit registers f to run (last registered first) when the benchmark
// ends, however it ends.
func atExit(f func()) {
	cleanupMu.Lock()
	defer cleanupMu.Unlock()
	cleanups = append(cleanups, f)
}

// cleanup runs the registered functions once.
func cleanup() {
	cleanupMu.Lock()
	fs := cleanups
	cleanups = nil
	cleanupMu.Unlock()
	for i := len(fs) - 1; i >= 0; i-- {
		fs[i]()
	}
}

// fatalf cleans up, then exits with the message (log.Fatalf would skip
// deferred functions and leave the guest and the work directory behind).
func fatalf(format string, args ...any) {
	log.Printf(format, args...)
	cleanup()
	os.Exit(1)
}

func must(err error) {
	if err != nil {
		fatalf("%v", err)
	}
}

// rootContext is the run's context: cancelled after limit, or at SIGINT
// or SIGTERM, when it cleans up and exits at once (the main goroutine may
// be inside a wait that is not watching the context).
func rootContext(limit time.Duration) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-sig:
			cancel()
			fatalf("%v: stopping the guest and cleaning up", s)
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// within runs f under a deadline of d and exits, naming what it waited
// for, when f fails or the deadline passes.
func within(ctx context.Context, d time.Duration, what string, f func(context.Context) error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := f(ctx); err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			fatalf("%s: nothing after %s (the deadline): %v", what, d, err)
		}
		fatalf("%s: %v", what, err)
	}
}

// command is exec.CommandContext with the child killed when the
// benchmark dies too (SIGKILL as parent-death signal).
func command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// output runs cmd under commandDeadline and returns its standard output.
func output(ctx context.Context, what string, name string, args ...string) []byte {
	var out []byte
	within(ctx, commandDeadline, what, func(ctx context.Context) error {
		cmd := command(ctx, name, args...)
		cmd.Stderr = os.Stderr
		var err error
		out, err = cmd.Output()
		return err
	})
	return out
}

// cofferNice is the niceness the -nice flag runs coffer at.
var cofferNice int

// cofferCommand runs coffer with args, at cofferNice, under ctx.
func cofferCommand(ctx context.Context, bin string, args ...string) *exec.Cmd {
	if cofferNice == 0 {
		return command(ctx, bin, args...)
	}
	return command(ctx, "nice", append([]string{"-n", strconv.Itoa(cofferNice), bin}, args...)...)
}

// runCoffer runs coffer under commandDeadline and returns its output.
func runCoffer(ctx context.Context, bin string, env []string, args ...string) (out []byte, state *os.ProcessState) {
	within(ctx, commandDeadline, fmt.Sprintf("coffer %v", args), func(ctx context.Context) error {
		cmd := cofferCommand(ctx, bin, args...)
		cmd.Env, cmd.Stderr = env, os.Stderr
		var err error
		out, err = cmd.Output()
		state = cmd.ProcessState
		return err
	})
	return out, state
}
