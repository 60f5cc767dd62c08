package fleetcmd

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

func (a *app) cmdJobs() *cobra.Command {
	var in api.ListJobsInput
	var limit int
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "list recent jobs from the catalog",
		Long: command.Manual(`List jobs recorded in the catalog, newest first: runs of policies
(backup-policy, also skipped scheduled runs), cleanups of leftovers found at
start, and the other long operations run as tasks (restore, verify, gc,
...). A running job shows how far it got; one whose process died is
marked failed ("interrupted") by the next coffer process that notices (at
once on the same host).`,
			`A table: ID, KIND, POLICY, STATUS, USER, STARTED, DURATION, VMS
OK/FAILED/TOTAL, ERROR. --json: a list of job documents (id, kind,
policy, repository, status, worker, started, finished, duration_seconds,
tasks_total, tasks_ok, tasks_failed, error); `+"`job show`"+` adds tasks and
events.`,
			`coffer jobs
coffer jobs --policy nightly --status partial --limit 5 --json
coffer jobs --vm web-1 --user alice`,
			"0; 1 when the catalog cannot be opened."),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			jobs, err := listPages[api.Job](cmd.Context(), a, "list-jobs", &in, limit, func(size int, after string) (err error) {
				in.Limit = size
				if after != "" {
					in.After, err = strconv.ParseInt(after, 10, 64)
				}
				return err
			})
			if err != nil {
				return err
			}
			return a.Emit(jobs, nil, func() {
				tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tKIND\tPOLICY\tSTATUS\tUSER\tSTARTED\tDURATION\tVMS OK/FAILED/TOTAL\tERROR")
				for _, j := range jobs {
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d/%d/%d\t%s\n", j.ID, j.Kind, command.Dash(j.Policy), j.Status, command.Dash(j.User),
						j.Started.Local().Format("2006-01-02 15:04:05"), duration(j.Started, j.Finished), j.TasksOK, j.TasksFailed, j.TasksTotal, command.Clip(j.Error, 60))
				}
				_ = tw.Flush()
			})
		},
	}
	cmd.Flags().StringVar(&in.Policy, "policy", "", "only jobs of this policy")
	cmd.Flags().StringVar(&in.Kind, "kind", "", "only jobs of this kind (backup-policy, restore, verify, gc, cleanup, ...)")
	cmd.Flags().StringVar(&in.User, "user", "", "only jobs started by this user")
	cmd.Flags().StringVar(&in.VM, "vm", "", "only jobs on this VM (name or ID), including runs of policies that backed it up")
	cmd.Flags().StringVar(&in.Status, "status", "", "only jobs with this status (running, success, partial, failed, cancelled)")
	cmd.Flags().IntVar(&limit, "limit", 50, "show at most this many jobs (0: all)")
	return command.RemoteToo(command.Op(cmd, "list-jobs"))
}

// listPages lists up to limit items (0: all) of a paged listing, a page
// at a time, here or through the server: an answer holds at most command.MaxPage
// items. page sets the size of the next page and the cursor it continues
// after ("" for the first) on the operation's input in.
func listPages[T any](ctx context.Context, a *app, id string, in any, limit int, page func(size int, after string) error) ([]T, error) {
	out := []T{}
	after := ""
	for {
		size := command.MaxPage
		if limit > 0 {
			size = min(size, limit-len(out))
		}
		if err := page(size, after); err != nil {
			return nil, err
		}
		items, next, err := command.RunPage[[]T](ctx, a.App, id, in)
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		if next == "" || (limit > 0 && len(out) >= limit) {
			return out, nil
		}
		after = next
	}
}

// wholeJob gets a job with all its tasks and its whole log, here or
// through the server, which answer them a page at a time.
func (a *app) wholeJob(ctx context.Context, id int64) (*api.Job, error) {
	in := api.GetJobInput{JobParam: api.JobParam{ID: id}, Tasks: command.MaxPage, Log: command.MaxPage}
	j, next, err := command.RunPage[*api.Job](ctx, a.App, "get-job", &in)
	if err != nil {
		return nil, err
	}
	for next != "" {
		more := api.GetJobInput{JobParam: in.JobParam, Tasks: command.MaxPage, Log: 1}
		if more.TasksAfter, err = strconv.ParseInt(next, 10, 64); err != nil {
			return nil, err
		}
		var page *api.Job
		if page, next, err = command.RunPage[*api.Job](ctx, a.App, "get-job", &more); err != nil {
			return nil, err
		}
		j.Tasks = append(j.Tasks, page.Tasks...)
	}
	for int64(len(j.Events)) < j.LogLines {
		log := api.JobLogInput{JobParam: in.JobParam, Limit: 10000}
		if n := len(j.Events); n > 0 {
			log.Start = j.Events[n-1].Seq
		}
		lines, err := command.RunOp[[]api.Event](ctx, a.App, "job-log", &log)
		if err != nil {
			return nil, err
		}
		if len(lines) == 0 {
			break // the log is shorter than it said (pruned meanwhile)
		}
		j.Events = append(j.Events, lines...)
	}
	return j, nil
}

func (a *app) cmdJob() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "job",
		Short: "inspect one job",
		Long: command.Manual(`Inspect one job of the catalog (`+"`coffer jobs`"+` lists them).`,
			"See the subcommands.", "coffer job show 42", "That of the subcommand."),
	}
	cmd.AddCommand(command.RemoteToo(command.Op(&cobra.Command{
		Use:   "show ID",
		Short: "show a job with its per-VM tasks and events",
		Long: command.Manual(`Show one job of the catalog: what ran, where, how it ended, each VM's
task (host, status, mode, the VM snapshot mode asked for and achieved,
attempts, bytes read and stored, duration, backup point, error) and the
job's events in order (snapshots created and removed, retries, disks
done, retention, cleanup).`,
			`The job's summary, then TASKS (a table) and EVENTS (one line each).
--json: the job document with tasks and events ([] when there are none).`,
			`coffer job show 42
coffer job show 42 --json | jq '.tasks[] | select(.status == "failed")'`,
			"0; 2 for an ID that is not a number; 7 for an unknown job."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil {
				return command.Usagef("job ID %q is not a number", args[0])
			}
			j, err := a.wholeJob(cmd.Context(), id)
			if err != nil {
				return err
			}
			return a.Emit(j, nil, func() { a.printJob(j) })
		},
	}, "get-job")), a.cmdJobLog(), a.cmdJobFollow(), a.cmdJobCancel())
	return cmd
}

func (a *app) printJob(j *api.Job) {
	fmt.Fprintf(a.Stdout, "job %d: %s %s, policy %s, repository %s, on %s\n", j.ID, j.Kind, j.Status, command.Dash(j.Policy), command.Dash(j.Repository), command.Dash(j.Worker))
	if j.Object != "" || j.User != "" {
		by := command.Dash(j.User)
		if j.Token != "" {
			by += " (token " + j.Token + ")"
		}
		fmt.Fprintf(a.Stdout, "on %s, started by %s\n", command.Dash(j.Object), by)
	}
	fmt.Fprintf(a.Stdout, "started %s, took %s; VMs: %d ok, %d failed, %d total\n", j.Started.Local().Format(time.RFC3339),
		duration(j.Started, j.Finished), j.TasksOK, j.TasksFailed, j.TasksTotal)
	running := j.Finished.IsZero()
	if p := j.Progress; p != nil && running {
		line := fmt.Sprintf("progress: %s of %s, %d of %d items", command.HumanBytes(p.DoneBytes), command.HumanBytes(p.TotalBytes), p.ItemsDone, p.ItemsTotal)
		if p.RateBytesPerSecond > 0 {
			line += fmt.Sprintf(", %s/s", command.HumanBytes(int64(p.RateBytesPerSecond)))
		}
		if p.ETASeconds > 0 {
			line += ", ETA " + (time.Duration(p.ETASeconds) * time.Second).String()
		}
		fmt.Fprintln(a.Stdout, line)
	}
	if running && j.OwnerPID > 0 {
		fmt.Fprintf(a.Stdout, "running in process %d on %s, last heard of %s\n", j.OwnerPID, command.Dash(j.OwnerHost), j.Heartbeat.Local().Format(time.RFC3339))
	}
	if !j.CancelRequested.IsZero() {
		fmt.Fprintf(a.Stdout, "cancel requested %s\n", j.CancelRequested.Local().Format(time.RFC3339))
	}
	if j.Error != "" {
		fmt.Fprintf(a.Stdout, "error: %s\n", j.Error)
	}
	if len(j.Tasks) > 0 {
		fmt.Fprintln(a.Stdout, "\nTASKS")
		tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tVM\tHOST\tSTATUS\tMODE\tCONSISTENCY\tATTEMPTS\tREAD\tSTORED\tDURATION\tPOINT\tERROR")
		for _, t := range j.Tasks {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.VM, command.Dash(t.Host), t.Status, t.Mode,
				taskConsistency(t), t.Attempts, command.HumanBytes(t.ReadBytes), command.HumanBytes(t.StoredBytes),
				duration(t.Started, t.Finished), command.Dash(command.Clip(t.PointID, 12)), command.Clip(t.Error, 60))
		}
		_ = tw.Flush()
	}
	if len(j.Events) > 0 {
		fmt.Fprintf(a.Stdout, "\nEVENTS (log, %d lines)\n", len(j.Events))
		for _, e := range j.Events {
			task := ""
			if e.TaskID != 0 {
				task = fmt.Sprintf(" task %d", e.TaskID)
			}
			fmt.Fprintf(a.Stdout, "%s %-5s %s%s: %s\n", e.Time.Local().Format("15:04:05.000"), e.Level, e.Kind, task, e.Message)
		}
	}
}

// taskConsistency is the CONSISTENCY column of a task: what its point
// holds ("-" while it has none).
func taskConsistency(t api.VMTask) string {
	if t.PointID == "" {
		return "-"
	}
	return api.Consistency(t.SnapshotMode, t.SnapshotModeAchieved, "")
}

func duration(from, to time.Time) string {
	if from.IsZero() {
		return "-"
	}
	if to.IsZero() {
		return "running"
	}
	return to.Sub(from).Round(time.Millisecond).String()
}
