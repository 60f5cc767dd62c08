package replicaops

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/failover"
	"github.com/coffer-backup/coffer/internal/service"
)

// errNotPassed fails an operation whose plan did not pass (a VM that did
// not start, a probe that failed): the report says which, and the error
// names the first (notPassed).
var errNotPassed = errors.New("the failover plan did not pass")

// fill copies a plan's report into the operation's document (the job's
// log had each step and probe as it ended: jobWatcher).
func fill(out *api.FailoverRun, rep *failover.Report, started []*failover.Started) *api.FailoverRun {
	if rep == nil {
		return out
	}
	out.Passed, out.Seconds = rep.Passed, rep.Duration.Seconds()
	for _, st := range rep.Steps {
		out.Steps = append(out.Steps, stepDoc(st))
	}
	for _, p := range rep.Probes {
		out.Probes = append(out.Probes, probeDoc(p))
	}
	for _, s := range started {
		out.VMs = append(out.VMs, api.FailoverVM{VM: s.VM, Seq: s.Seq, BackupPoint: s.BackupPoint, PID: s.PID, Resumed: s.Resumed})
	}
	return out
}

func stepDoc(st failover.Step) api.FailoverStep {
	return api.FailoverStep{Group: st.Group, VM: st.VM, Name: st.Name, Seconds: st.Duration.Seconds(), Error: st.Error, Detail: st.Detail}
}

func probeDoc(p failover.ProbeResult) api.FailoverProbe {
	return api.FailoverProbe{Group: p.Group, VM: p.VM, Probe: p.Probe, Passed: p.Passed, Evidence: p.Evidence, Error: p.Error, Seconds: p.Duration.Seconds()}
}

// jobWatcher writes each step and probe of a run into its job's log as
// it ends, as an event whose fields hold the whole step (the step or
// probe field names it): failover-plan-runs reads the runs back from
// these events, so that the API, the command line and the console show
// the same steps, live while a run goes on.
type jobWatcher struct{ t service.Job }

func (w jobWatcher) Step(st failover.Step) { w.step(stepDoc(st)) }

func (w jobWatcher) step(d api.FailoverStep) {
	level := slog.LevelInfo
	if d.Error != "" {
		level = slog.LevelError
	}
	w.t.Log(level, "step "+d.Name, stepField, d.Name, "group", d.Group, "vm", d.VM, "seconds", d.Seconds, "error", d.Error, "detail", d.Detail)
}

func (w jobWatcher) Probe(p failover.ProbeResult) {
	d := probeDoc(p)
	level := slog.LevelInfo
	if !d.Passed {
		level = slog.LevelError
	}
	w.t.Log(level, "probe "+d.Probe, probeField, d.Probe, "group", d.Group, "vm", d.VM, "passed", d.Passed, "seconds", d.Seconds,
		"evidence", d.Evidence, "error", d.Error)
}

// The fields that mark a run's events: its kind (the first event),
// a step, a probe.
const (
	runField   = "failover_run"
	stepField  = "step"
	probeField = "probe"
)

// passed is out with errNotPassed when its plan did not pass.
func passed(out *api.FailoverRun, err error) (*api.FailoverRun, error) {
	if err == nil && !out.Passed {
		err = notPassed(out)
	}
	return out, err
}

// notPassed is errNotPassed naming the run's first failure: the step of
// a group (a VM that did not start, a group's readiness check that timed
// out...), else the probe, else the discard that ended the test, so that
// the job's error in the catalog (coffer jobs, the console) says what
// failed, not only that something did.
func notPassed(out *api.FailoverRun) error {
	var discard *api.FailoverStep
	for i, s := range out.Steps {
		switch {
		case s.Error == "":
		case s.Group == 0:
			discard = &out.Steps[i]
		default:
			return fmt.Errorf("%w: group %d, %s, %s: %s (see its steps and probes)", errNotPassed, s.Group, s.VM, s.Name, s.Error)
		}
	}
	for _, p := range out.Probes {
		if !p.Passed {
			return fmt.Errorf("%w: group %d, %s, probe %s: %s (see its steps and probes)", errNotPassed, p.Group, p.VM, p.Probe, p.Error)
		}
	}
	if discard != nil {
		return fmt.Errorf("%w: %s: %s", errNotPassed, discard.Name, discard.Error)
	}
	return fmt.Errorf("%w: see its steps and probes", errNotPassed)
}
