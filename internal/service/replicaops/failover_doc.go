package replicaops

import (
	"errors"
	"log/slog"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/failover"
	"github.com/coffer-backup/coffer/internal/service"
)

// errNotPassed fails an operation whose plan did not pass (a VM that did
// not start, a probe that failed): the report says which.
var errNotPassed = errors.New("the failover plan did not pass: see its steps and probes")

// fill copies a plan's report into the operation's document and writes
// each step and probe into the job's log.
func fill(t service.Job, out *api.FailoverRun, rep *failover.Report, started []*failover.Started) *api.FailoverRun {
	if rep == nil {
		return out
	}
	out.Passed, out.Seconds = rep.Passed, rep.Duration.Seconds()
	for _, st := range rep.Steps {
		out.Steps = append(out.Steps, api.FailoverStep{Group: st.Group, VM: st.VM, Name: st.Name, Seconds: st.Duration.Seconds(), Error: st.Error, Detail: st.Detail})
		level := slog.LevelInfo
		if st.Error != "" {
			level = slog.LevelError
		}
		t.Log(level, "step "+st.Name, "group", st.Group, "vm", st.VM, "seconds", st.Duration.Round(time.Millisecond).Seconds(), "err", st.Error, "detail", st.Detail)
	}
	for _, p := range rep.Probes {
		out.Probes = append(out.Probes, api.FailoverProbe{Group: p.Group, VM: p.VM, Probe: p.Probe, Passed: p.Passed, Evidence: p.Evidence, Error: p.Error, Seconds: p.Duration.Seconds()})
		level := slog.LevelInfo
		if !p.Passed {
			level = slog.LevelError
		}
		t.Log(level, "probe "+p.Probe, "group", p.Group, "vm", p.VM, "passed", p.Passed, "evidence", p.Evidence, "err", p.Error)
	}
	for _, s := range started {
		out.VMs = append(out.VMs, api.FailoverVM{VM: s.VM, Seq: s.Seq, BackupPoint: s.BackupPoint, PID: s.PID, Resumed: s.Resumed})
	}
	return out
}

// passed is out with errNotPassed when its plan did not pass.
func passed(out *api.FailoverRun, err error) (*api.FailoverRun, error) {
	if err == nil && !out.Passed {
		err = errNotPassed
	}
	return out, err
}
