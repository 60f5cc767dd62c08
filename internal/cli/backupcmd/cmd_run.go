package backupcmd

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/service"
)

func (a *app) cmdRun() *cobra.Command {
	return command.RemoteToo(command.Op(&cobra.Command{
		Use:   "run POLICY",
		Short: "run a backup policy now",
		Long: command.Manual(`Run one backup policy now, in the foreground: inventory its connections,
select its VMs and back them up within every configured limit (tasks in
total, per host, per datastore, per resource group, per repository, I/O
rates). Live per-VM progress and an overall ETA are shown on a terminal.
What the policy will do differently from how it reads (the warnings of
`+"`coffer policy check`"+`) is printed first.

The job and one task per VM are recorded in the catalog (see `+"`coffer jobs`"+`
and `+"`coffer job show ID`"+`). Ctrl-C stops cleanly: running VMs release their
hypervisor snapshots, queued VMs are not started.

Through a server (--server), the server's engine runs the policy, within
the limits it holds for all its runs and on its workers, and the command
waits for the job's end and prints it (no live progress).`,
			`One line per VM as it finishes ("ok", "FAILED" with why), then the job's
summary. --json: the job document with its tasks.`,
			`coffer run nightly
coffer run nightly --json > result.json`,
			`0 when every VM was backed up; 6 (partial failure) when some failed,
naming each one and why; 1 when all failed; 2 for a policy the
configuration refuses; 130 when interrupted.`),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if a.Remote != nil {
				return a.runOnServer(cmd, args[0])
			}
			run, err := command.Call(a.App, func(s *service.Service) (*service.PolicyRun, error) {
				// Like the server: the task manager prunes old history and
				// the notifier sends how the run ended.
				if err := s.Start(cmd.Context(), service.StartOptions{Prune: true, Deliver: true}); err != nil {
					return nil, err
				}
				return s.RunPolicy(cmd.Context(), args[0])
			})
			if err != nil {
				return err
			}
			a.watch(run)
			j, err := run.Wait()
			if j == nil {
				return err
			}
			return a.Emit(j, err, func() { a.printRun(j) })
		},
	}, "backup-policy"))
}

// runOnServer runs the policy in the server's engine (within the limits
// it holds for every run, on the workers it places units on) and waits
// for its end: the job's summary, without the live progress of a local run.
func (a *app) runOnServer(cmd *cobra.Command, policy string) error {
	j, err := command.RunOp[*api.Job](cmd.Context(), a.App, "backup-policy", &api.BackupPolicyInput{PolicyParam: api.PolicyParam{Policy: policy}, Wait: true})
	if j == nil {
		return err
	}
	for _, t := range j.Tasks {
		if finished(t.Status) && !a.JSON && !a.Quiet {
			a.Printf("%s\n", taskLine(t))
		}
	}
	return a.Emit(j, err, func() { a.printRun(j) })
}

func (a *app) printRun(j *api.Job) {
	a.Printf("job %d (policy %s): %s, %d of %d VMs backed up in %s\n", j.ID, j.Policy, j.Status, j.TasksOK, j.TasksTotal,
		j.Finished.Sub(j.Started).Round(time.Millisecond))
	for _, t := range j.Tasks {
		if t.Status == "failed" {
			a.Printf("  failed %s: %s\n", t.VM, t.Error)
		}
	}
}

// watch shows progress until the run ends: a status line with the ETA on
// a terminal, and one line per finished VM unless --quiet or --json.
func (a *app) watch(run *service.PolicyRun) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	reported := map[int64]bool{}
	status := a.Interactive()
	for {
		done := false
		select {
		case <-run.Done():
			done = true
		case <-tick.C:
		}
		if status {
			fmt.Fprint(a.Stderr, "\r\033[K")
		}
		for _, t := range run.Tasks() {
			if finished(t.Status) && !reported[t.ID] {
				reported[t.ID] = true
				a.Printf("%s\n", taskLine(t))
			}
		}
		if done {
			return
		}
		if status {
			fmt.Fprint(a.Stderr, statusLine(run.Progress()))
		}
	}
}

func finished(status string) bool {
	return status == "success" || status == "partial" || status == "failed" || status == "cancelled"
}

func statusLine(p api.JobProgress) string {
	s := fmt.Sprintf("[%d/%d VMs", p.Done, p.VMs)
	if p.Failed > 0 {
		s += fmt.Sprintf(", %d failed", p.Failed)
	}
	s += fmt.Sprintf(", %d running] %s / %s", p.Running, command.HumanBytes(p.DoneBytes), command.HumanBytes(p.TotalBytes))
	if p.ETASeconds > 0 {
		s += ", ETA " + command.Seconds(p.ETASeconds).Round(time.Second).String()
	}
	if len(p.RunningVMs) > 0 {
		var names []string
		for _, v := range p.RunningVMs[:min(len(p.RunningVMs), 3)] {
			pct := 0
			if v.TotalBytes > 0 {
				pct = int(100 * v.DoneBytes / v.TotalBytes)
			}
			names = append(names, fmt.Sprintf("%s %d%%", v.VM, pct))
		}
		s += " | " + strings.Join(names, ", ")
	}
	return s
}

func taskLine(t api.VMTask) string {
	took := t.Finished.Sub(t.Started).Round(time.Millisecond)
	if t.Started.IsZero() {
		took = 0
	}
	switch t.Status {
	case "success":
		line := fmt.Sprintf("ok      %-24s %-12s %s read, %s stored in %s", t.VM, t.Mode, command.HumanBytes(t.ReadBytes), command.HumanBytes(t.StoredBytes), took)
		if t.Attempts > 1 {
			line += fmt.Sprintf(" (attempt %d)", t.Attempts)
		}
		for _, w := range t.Warnings {
			line += "\n        warning: " + w
		}
		return line
	case "failed":
		return fmt.Sprintf("FAILED  %-24s after %d attempt(s): %s", t.VM, t.Attempts, t.Error)
	}
	return fmt.Sprintf("%-7s %-24s %s", t.Status, t.VM, t.Error)
}
