package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine"
)

func (a *app) cmdRun() *cobra.Command {
	return &cobra.Command{
		Use:   "run POLICY",
		Short: "run a backup policy now",
		Long: `Run one backup policy now, in the foreground: inventory its connections,
select its VMs and back them up within every configured limit (tasks in
total, per host, per datastore, per resource group, per repository, I/O
rates). Live per-VM progress and an overall ETA are shown on a terminal.

The job and one task per VM are recorded in the catalog (see ` + "`coffer jobs`" + `
and ` + "`coffer job show ID`" + `). Ctrl-C stops cleanly: running VMs release their
hypervisor snapshots, queued VMs are not started.

Exit status 0 when every VM was backed up, 6 (partial failure) when some
failed, naming each one and why, 1 when all failed, 130 when interrupted.

EXAMPLES
    coffer run nightly
    coffer run nightly --json > result.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return a.runPolicy(cmd.Context(), args[0]) },
	}
}

func (a *app) runPolicy(ctx context.Context, name string) error {
	cfg, warnings, err := a.policyConfig()
	if err != nil {
		return err
	}
	p, ok := cfg.Policy(name)
	if !ok {
		return usagef("no policy named %q (`coffer policy check` lists them)", name)
	}
	a.warnFindings(warnings[p.Name])
	cat, err := a.openCatalog(ctx)
	if err != nil {
		return err
	}
	defer cat.Close()
	conns, storage, err := a.openConnectors(ctx, cfg, p.ConnectionNames())
	if err != nil {
		return err
	}
	eng, err := a.newEngine(ctx, cfg, cat, conns, storage)
	if err != nil {
		return err
	}
	defer eng.Close()
	job, err := eng.Start(ctx, p)
	if err != nil {
		return err
	}
	a.watch(job)
	res, err := job.Wait()
	if err != nil {
		return err
	}
	return a.reportJob(res)
}

// watch shows progress until the job ends: a status line with the ETA on
// a terminal, and one line per finished VM unless --quiet or --json.
func (a *app) watch(job *engine.Job) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	reported := map[int64]bool{}
	status := a.interactive()
	for {
		done := false
		select {
		case <-job.Done():
			done = true
		case <-tick.C:
		}
		if status {
			fmt.Fprint(a.stderr, "\r\033[K")
		}
		for _, t := range job.Tasks() {
			if t.Status.Done() && !reported[t.ID] {
				reported[t.ID] = true
				a.printf("%s\n", taskLine(t))
			}
		}
		if done {
			return
		}
		if status {
			fmt.Fprint(a.stderr, statusLine(job.Progress()))
		}
	}
}

func statusLine(p engine.Progress) string {
	s := fmt.Sprintf("[%d/%d VMs", p.Done, p.VMs)
	if p.Failed > 0 {
		s += fmt.Sprintf(", %d failed", p.Failed)
	}
	s += fmt.Sprintf(", %d running] %s / %s", p.Running, humanBytes(p.BytesDone), humanBytes(p.BytesTotal))
	if p.ETA > 0 {
		s += ", ETA " + p.ETA.Round(time.Second).String()
	}
	if len(p.RunningVMs) > 0 {
		var names []string
		for _, v := range p.RunningVMs[:min(len(p.RunningVMs), 3)] {
			pct := 0
			if v.BytesTotal > 0 {
				pct = int(100 * v.BytesDone / v.BytesTotal)
			}
			names = append(names, fmt.Sprintf("%s %d%%", v.VM, pct))
		}
		s += " | " + strings.Join(names, ", ")
	}
	return s
}

func taskLine(t catalog.Task) string {
	took := t.FinishedAt.Sub(t.StartedAt).Round(time.Millisecond)
	if t.StartedAt.IsZero() {
		took = 0
	}
	switch t.Status {
	case catalog.StatusSuccess:
		line := fmt.Sprintf("ok      %-24s %-12s %s read, %s stored in %s", t.VMName, t.Mode, humanBytes(t.BytesRead), humanBytes(t.BytesStored), took)
		if t.Attempts > 1 {
			line += fmt.Sprintf(" (attempt %d)", t.Attempts)
		}
		for _, w := range t.Warnings {
			line += "\n        warning: " + w
		}
		return line
	case catalog.StatusFailed:
		return fmt.Sprintf("FAILED  %-24s after %d attempt(s): %s", t.VMName, t.Attempts, t.Error)
	}
	return fmt.Sprintf("%-7s %-24s %s", t.Status, t.VMName, t.Error)
}

// reportJob prints the result and maps its status to the exit code.
func (a *app) reportJob(res *engine.Result) error {
	j := res.Job
	if a.jsonOut {
		if err := a.printJSON(jobJSON(j, res.Tasks, nil)); err != nil {
			return err
		}
	} else {
		a.printf("job %d (policy %s): %s, %d of %d VMs backed up in %s\n", j.ID, j.Policy, j.Status, j.TasksOK, j.TasksTotal,
			j.FinishedAt.Sub(j.StartedAt).Round(time.Millisecond))
		for _, t := range res.Failed() {
			a.printf("  failed %s: %s\n", t.VMName, t.Error)
		}
	}
	switch j.Status {
	case catalog.StatusSuccess:
		return nil
	case catalog.StatusPartial:
		return partialError{fmt.Sprintf("job %d: %s", j.ID, j.Error)}
	case catalog.StatusCancelled:
		return reportedError{fmt.Errorf("%w: job %d: %s", context.Canceled, j.ID, j.Error)}
	}
	return reportedError{fmt.Errorf("job %d failed: %s", j.ID, j.Error)}
}
