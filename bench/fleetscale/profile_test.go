package fleetscale

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"

	"github.com/coffer-backup/coffer/bench/fleetserver"
)

// profileEnv lists the files (comma-separated) into which the server,
// run as coffer by this binary, writes CPU profiles: the n-th between the
// n-th pair of SIGUSR1s. So the benchmark profiles each measured run
// alone in the one server that runs them all (a server restarted with
// --cpu-profile for the workers' run would add its start, its key
// derivation and first health statistics, to the run).
const profileEnv = "COFFER_BENCH_PROFILE_ON_SIGNAL"

// profiledMsg is what the profiled process writes to its standard error
// once a profile is complete.
const profiledMsg = "bench: CPU profile written"

// profileOnSignal profiles this process between pairs of SIGUSR1s if it
// is coffer run by the benchmark with profileEnv set.
func profileOnSignal() {
	files := os.Getenv(profileEnv)
	if os.Getenv(strings.TrimSuffix(asCoffer, "=1")) != "1" || files == "" {
		return
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, syscall.SIGUSR1)
	go func() {
		for _, file := range strings.Split(files, ",") {
			<-sig
			if err := profileUntil(file, sig); err != nil {
				fmt.Fprintf(os.Stderr, "bench: CPU profile: %v\n", err)
				return
			}
			fmt.Fprintln(os.Stderr, profiledMsg)
		}
	}()
}

// profileUntil writes a CPU profile into file until sig is received.
func profileUntil(file string, sig <-chan os.Signal) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return err
	}
	<-sig
	pprof.StopCPUProfile()
	return f.Close()
}

// serverProfiles are the server's profiles, in the order measured: the
// in-process run's and the workers' run's.
var serverProfiles = []string{"server.prof", "leader.prof"}

// profiling is the benchmark's side of profileOnSignal: the
// environment that asks the server for its profiles, and the signals.
type profiling struct {
	dir  string // "": no profiles
	done int    // profiles written so far
}

// env is the server's environment for the profiles.
func (p *profiling) env() []string {
	if p.dir == "" {
		return nil
	}
	var files []string
	for _, f := range serverProfiles {
		files = append(files, filepath.Join(p.dir, f))
	}
	return []string{profileEnv + "=" + strings.Join(files, ",")}
}

// around profiles srv while run runs.
func (p *profiling) around(b *testing.B, srv *fleetserver.Server, run func() phase) phase {
	b.Helper()
	if p.dir == "" {
		return run()
	}
	signal := func() {
		if err := syscall.Kill(srv.PID(), syscall.SIGUSR1); err != nil {
			b.Fatal(err)
		}
	}
	signal()
	ph := run()
	signal()
	p.done++
	waitFor(b, "the server's profile", func() string {
		if strings.Count(srv.Log(), profiledMsg) < p.done {
			return ""
		}
		return profiledMsg
	}, profiledMsg)
	return ph
}
