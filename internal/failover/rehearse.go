package failover

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/bootverify"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/replica"
)

// RehearseOptions adjust a test failover.
type RehearseOptions struct {
	// StateDir holds the run's directory (overlays, sockets), removed at
	// the end; a killed run's is removed by the next one (Leftovers).
	StateDir string
	// Seq is the restore point each VM starts from (0: its newest).
	Seq int
	// Stop is how long a VM is given to quit before it is killed.
	Stop time.Duration
	Log  *slog.Logger
	// Watch hears of each step and probe as it ends (nil: nobody).
	Watch Watcher
	// Destroy ends a killed run's copies of standby domains, which the
	// run removes before its own (nil: such a run is left).
	Destroy CopyDestroyer
}

// rehearsalRoot is where test failovers keep their run directories.
func rehearsalRoot(stateDir string) string { return filepath.Join(stateDir, "failover-tests") }

// Rehearse runs a test failover of plan: each group's VMs start at once
// (startGroup) on throw-away overlays of their standbys, isolated, then
// are probed, and the next group waits for that and the group's delay.
// Everything is stopped and removed at the end, whatever happened (the
// VMs of a group that started beside one that failed too); the
// standbys are only read,
// and locked meanwhile against replication runs and a second test
// (lockStandbys). The error is for a run that could not be attempted (a
// standby another run holds, too); a VM that did not start, a probe that
// failed or a VM that could not be stopped is in the report (Passed
// false).
func Rehearse(ctx context.Context, plan Plan, o RehearseOptions) (*Report, error) {
	if o.StateDir == "" {
		return nil, errors.New("a test failover needs a state directory")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Stop <= 0 {
		o.Stop = 10 * time.Second
	}
	RemoveLeftoversOf(context.WithoutCancel(ctx), o.StateDir, o.Destroy, o.Log)
	held, err := lockStandbys(plan)
	if err != nil {
		return nil, err
	}
	defer held.release() // after the discard below: the VMs no longer read the points
	rep := &Report{Plan: plan.Name, Test: true, Started: time.Now().UTC(), Passed: true, watch: o.Watch}
	run := id.Random().String()[:8]
	runDir := filepath.Join(rehearsalRoot(o.StateDir), run)
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		return nil, err
	}
	lock, _, err := lockRunDir(runDir) // a new directory: no one else holds it
	if err != nil {
		return nil, err
	}
	var started []*machine
	defer func() { _ = lock.Close() }() // after the directory's removal below
	defer func() {
		began := time.Now()
		var errs []error
		for _, m := range started {
			errs = append(errs, m.stop(context.WithoutCancel(ctx), o.Stop))
		}
		if errors.Join(errs...) == nil { // else kept for RemoveLeftovers: a VM may run on it
			errs = append(errs, removeSocketDirs(runDir), os.RemoveAll(runDir))
		}
		err := errors.Join(errs...)
		rep.step(0, "", "discard", began, err, fmt.Sprintf("%d VM(s) stopped, their overlays removed", len(started)))
		rep.Passed = rep.Passed && err == nil // a VM left running is no clean test
		rep.Duration = time.Since(rep.Started)
	}()
	for gi, g := range plan.Groups {
		n := gi + 1
		ms := make([]*machine, len(g.VMs))
		errs := make([]error, len(g.VMs))
		steps := make([]stepBuf, len(g.VMs))
		ok := true
		startGroup(len(g.VMs), func(i int) {
			began := time.Now()
			dir := filepath.Join(runDir, fmt.Sprintf("%d.%d", n, i))
			ms[i], errs[i] = rehearseOne(ctx, g.VMs[i], g, dir, run, o.Seq)
			steps[i].step(n, g.VMs[i].Name, "start", began, errs[i], startDetail(ms[i]))
		}, func(i int) {
			if ms[i] != nil { // even with an error: what it made is discarded
				started = append(started, ms[i])
			}
			rep.add(steps[i]...)
			o.Log.Info("test failover: VM started", "plan", plan.Name, "group", n, "vm", g.VMs[i].Name, "err", errs[i])
			ok = ok && errs[i] == nil
		})
		if !ok || !runGroupChecks(ctx, rep, n, g, ms, o.Log) {
			rep.Passed = false
			return rep, nil
		}
	}
	return rep, nil
}

// rehearseOne starts vm of group g for a test failover, in dir of run.
// The machine it returns, even with an error, is to be discarded.
func rehearseOne(ctx context.Context, vm VM, g Group, dir, run string, seq int) (*machine, error) {
	switch {
	case vm.Remote != nil:
		return rehearseRemote(ctx, vm, dir, run, seq)
	case vm.Copies != nil:
		return rehearseCopy(ctx, vm, g, dir, run, seq)
	default:
		return rehearseStart(ctx, vm, g, dir, seq)
	}
}

// testLocks are the test failover's locks on the plan's standbys.
type testLocks []io.Closer

// lockStandbys takes a test failover's lock (replica.LockTest) on the
// standby of each VM of the plan, before anything starts: while the test
// runs, no replication changes the points its VMs read, and a second
// test of the same standbys is refused. A standby its DR site's
// hypervisor keeps (Remote) has no directory of coffer's to lock; a
// directory that does not exist has no point to start from, which the
// VM's start step reports.
func lockStandbys(plan Plan) (testLocks, error) {
	var held testLocks
	seen := map[string]bool{}
	for _, g := range plan.Groups {
		for _, vm := range g.VMs {
			if vm.Remote != nil || seen[vm.Dir] {
				continue
			}
			seen[vm.Dir] = true
			if _, err := os.Stat(vm.Dir); errors.Is(err, fs.ErrNotExist) {
				continue
			}
			l, err := replica.LockTest(vm.Dir)
			if err != nil {
				held.release()
				return nil, fmt.Errorf("the standby of %s: %w", vm.Name, err)
			}
			held = append(held, l)
		}
	}
	return held, nil
}

func (h testLocks) release() {
	for _, l := range h {
		_ = l.Close() // an unlock: nothing to report
	}
}

// rehearseStart starts one VM of a test failover in dir.
func rehearseStart(ctx context.Context, vm VM, g Group, dir string, seq int) (*machine, error) {
	def, pt, err := loadStandby(vm, seq)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	disks := map[string]string{}
	for k, f := range pt.disks {
		ov := filepath.Join(dir, fileName(k)+".qcow2")
		if err := createOverlay(ctx, ov, f); err != nil {
			return nil, err
		}
		disks[k] = ov
	}
	var ports []int
	for _, p := range g.Probes {
		if p.Kind != bootverify.ProbeExec {
			ports = append(ports, p.Port)
		}
	}
	sockets, err := shortSocketDir(dir)
	if err != nil {
		return nil, err
	}
	return start(ctx, launch{def: def, dir: sockets, disk: disks, isolated: true, probes: ports, cloudInit: vm.CloudInit})
}

// runGroupChecks runs, for each VM of a started group, its re-addressing
// (through its guest agent, then by its script), the group's probes and
// its script, then waits the group's delay; false when any of it failed.
func runGroupChecks(ctx context.Context, rep *Report, n int, g Group, ms []*machine, log *slog.Logger) bool {
	ok := true
	for i, vm := range g.VMs {
		if ms[i].ready != nil && !remoteReady(ctx, rep, n, g, vm, ms[i]) {
			ok = false
			continue
		}
		if vm.AgentAddress != "" {
			began := time.Now()
			actx, cancel := context.WithTimeout(ctx, cmpDuration(g.ProbeTimeout, 5*time.Minute))
			out, err := readdressByAgent(actx, vm, ms[i])
			cancel()
			rep.step(n, vm.Name, "readdress", began, err, out)
			ok = ok && err == nil
		}
		if vm.Readdress != "" {
			began := time.Now()
			out, err := runScript(ctx, vm.Readdress, vm, ms[i])
			rep.step(n, vm.Name, "readdress", began, err, out)
			ok = ok && err == nil
		}
		probes := g.Probes
		if ms[i].isolated && len(probes) > 0 {
			skipProbes(rep, n, g, vm)
			probes = nil
		}
		for _, p := range probes {
			began := time.Now()
			pctx, cancel := context.WithTimeout(ctx, cmpDuration(g.ProbeTimeout, 5*time.Minute))
			host := "127.0.0.1"
			if ms[i].forward == nil {
				host = vm.Address
			}
			var ev string
			var err error
			if host == "" && p.Kind != bootverify.ProbeExec {
				err = fmt.Errorf("the plan gives %s no address to probe", vm.Name)
			} else {
				ev, err = bootverify.Check(pctx, p, host, ms[i].forward, ms[i].agentSock)
			}
			cancel()
			pr := ProbeResult{Group: n, VM: vm.Name, Probe: p.String(), Passed: err == nil, Evidence: ev, Duration: time.Since(began)}
			if err != nil {
				pr.Error, ok = err.Error(), false
			}
			rep.probe(pr)
			log.Info("failover probe", "group", n, "vm", vm.Name, "probe", p.String(), "passed", err == nil, "err", err)
		}
		if vm.Script != "" && ok {
			began := time.Now()
			out, err := runScript(ctx, vm.Script, vm, ms[i])
			rep.step(n, vm.Name, "script", began, err, out)
			ok = ok && err == nil
		}
	}
	if ok && g.Delay > 0 {
		began := time.Now()
		select {
		case <-time.After(g.Delay):
		case <-ctx.Done():
		}
		rep.step(n, "", "delay", began, ctx.Err(), fmt.Sprintf("the group's delay of %s", g.Delay))
		ok = ctx.Err() == nil
	}
	return ok
}

// runScript runs a plan's script for vm on this host, with what it needs
// to reach the VM in its environment.
func runScript(ctx context.Context, script string, vm VM, m *machine) (string, error) {
	cmd := exec.CommandContext(ctx, script)
	cmd.Env = append(os.Environ(), "COFFER_VM="+vm.Name, "COFFER_VM_DIR="+m.dir, "COFFER_QMP="+m.qmpPath,
		"COFFER_GUEST_AGENT="+m.agentSock, "COFFER_VM_ADDRESS="+vm.Address)
	for g, h := range m.forward {
		cmd.Env = append(cmd.Env, fmt.Sprintf("COFFER_PORT_%d=%d", g, h))
	}
	out, err := cmd.CombinedOutput()
	s := strings.TrimSpace(string(out))
	if len(s) > 512 {
		s = s[len(s)-512:]
	}
	if err != nil {
		return s, fmt.Errorf("%s: %v", script, err)
	}
	return s, nil
}

// loadStandby reads a standby's definition and the point of seq.
func loadStandby(vm VM, seq int) (*replica.Definition, pointRef, error) {
	def, err := replica.LoadDefinition(vm.Dir)
	if err != nil {
		return nil, pointRef{}, fmt.Errorf("standby of %s: %w", vm.Name, err)
	}
	st, err := replica.LoadState(vm.Dir)
	if err != nil {
		return nil, pointRef{}, err
	}
	var refs []pointRef
	for _, p := range st.Points {
		r := pointRef{seq: p.Seq, backupPoint: p.BackupPoint, disks: map[string]string{}}
		for _, d := range p.Disks {
			r.disks[d.Key] = d.File
		}
		refs = append(refs, r)
	}
	pt, err := pick(vm, seq, refs)
	return def, pt, err
}

func cmpDuration(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// fileName makes a name safe in a file name.
func fileName(s string) string {
	return strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' {
			return c
		}
		return '_'
	}, s)
}
