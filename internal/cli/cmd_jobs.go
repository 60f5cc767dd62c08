package cli

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/task"
)

func (a *app) cmdJobs() *cobra.Command {
	var f catalog.JobFilter
	var status string
	cmd := &cobra.Command{
		Use:   "jobs",
		Short: "list recent jobs (tasks) from the catalog",
		Long: `List jobs recorded in the catalog, newest first: runs of policies
(backup-policy, also skipped scheduled runs), cleanups of leftovers found
at start, and the other long operations the server runs as tasks (restore,
verify, gc, ...). A running job shows how far it got; one whose process
died is marked failed ("interrupted") by the next coffer process that
notices (at once on the same host).

EXAMPLES
    coffer jobs
    coffer jobs --policy nightly --status partial --limit 5 --json
    coffer jobs --vm web-1 --user alice@pam`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			f.Status = catalog.Status(status)
			cat, err := a.openCatalog(ctx)
			if err != nil {
				return err
			}
			defer cat.Close()
			a.markInterrupted(ctx, cat)
			jobs, err := cat.ListJobs(ctx, f)
			if err != nil {
				return err
			}
			if a.jsonOut {
				docs := make([]jobDoc, len(jobs))
				for i, j := range jobs {
					docs[i] = jobJSON(j, nil, nil)
				}
				return a.printJSON(docs)
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tKIND\tPOLICY\tSTATUS\tUSER\tSTARTED\tDURATION\tVMS OK/FAILED/TOTAL\tERROR")
			for _, j := range jobs {
				fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d/%d/%d\t%s\n", j.ID, j.Kind, dash(j.Policy), j.Status, dash(j.User),
					j.StartedAt.Local().Format("2006-01-02 15:04:05"), jobDuration(j), j.TasksOK, j.TasksFail, j.TasksTotal, clip(j.Error, 60))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&f.Policy, "policy", "", "only jobs of this policy")
	cmd.Flags().StringVar(&f.Kind, "kind", "", "only jobs of this kind (backup-policy, restore, verify, gc, cleanup, ...)")
	cmd.Flags().StringVar(&f.User, "user", "", "only jobs started by this user")
	cmd.Flags().StringVar(&f.VM, "vm", "", "only jobs on this VM (name or ID), including runs of policies that backed it up")
	cmd.Flags().StringVar(&status, "status", "", "only jobs with this status (running, success, partial, failed, cancelled)")
	cmd.Flags().IntVar(&f.Limit, "limit", 50, "show at most this many jobs (0: all)")
	return cmd
}

func (a *app) cmdJob() *cobra.Command {
	cmd := &cobra.Command{Use: "job", Short: "inspect one job"}
	cmd.AddCommand(&cobra.Command{
		Use:   "show ID",
		Short: "show a job with its per-VM tasks and its log (events)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil {
				return usagef("job ID %q is not a number", args[0])
			}
			cat, err := a.openCatalog(ctx)
			if err != nil {
				return err
			}
			defer cat.Close()
			a.markInterrupted(ctx, cat)
			j, err := cat.GetJob(ctx, id)
			if err != nil {
				return fmt.Errorf("job %d: %w", id, err)
			}
			tasks, err := cat.ListTasks(ctx, catalog.TaskFilter{JobID: id})
			if err != nil {
				return err
			}
			events, err := cat.JobLog(ctx, id, 0, 0) // in the order recorded
			if err != nil {
				return err
			}
			if a.jsonOut {
				return a.printJSON(jobJSON(j, tasks, events))
			}
			return a.printJob(j, tasks, events)
		},
	})
	return cmd
}

// markInterrupted marks the jobs whose process died as failed
// ("interrupted") before they are shown, rather than show them running
// forever. The listing goes on if that fails (a read-only catalog).
func (a *app) markInterrupted(ctx context.Context, cat catalog.Catalog) {
	if _, err := task.MarkInterrupted(ctx, cat, task.Options{Logger: a.log}); err != nil {
		a.log.Warn("marking the jobs of processes that died failed", "err", err)
	}
}

func (a *app) printJob(j catalog.Job, tasks []catalog.Task, events []catalog.Event) error {
	fmt.Fprintf(a.stdout, "job %d: %s %s, policy %s, repository %s, on %s\n", j.ID, j.Kind, j.Status, dash(j.Policy), dash(j.Repository), dash(j.Worker))
	if j.Object != "" || j.User != "" {
		by := dash(j.User)
		if j.Token != "" {
			by += " (token " + j.Token + ")"
		}
		fmt.Fprintf(a.stdout, "on %s, started by %s\n", dash(j.Object), by)
	}
	fmt.Fprintf(a.stdout, "started %s, took %s; VMs: %d ok, %d failed, %d total\n", j.StartedAt.Local().Format(time.RFC3339),
		jobDuration(j), j.TasksOK, j.TasksFail, j.TasksTotal)
	if p := j.Progress; !j.Status.Done() && (p.BytesTotal > 0 || p.ItemsTotal > 0) {
		line := fmt.Sprintf("progress: %s of %s, %d of %d items", humanBytes(p.BytesDone), humanBytes(p.BytesTotal), p.ItemsDone, p.ItemsTotal)
		if p.BytesPerSecond > 0 {
			line += fmt.Sprintf(", %s/s", humanBytes(int64(p.BytesPerSecond)))
		}
		if p.ETA > 0 {
			line += ", ETA " + p.ETA.String()
		}
		fmt.Fprintln(a.stdout, line)
	}
	if !j.Status.Done() && j.Owner.PID > 0 {
		fmt.Fprintf(a.stdout, "running in process %d on %s, last heard of %s\n", j.Owner.PID, dash(j.Owner.Host), j.Heartbeat.Local().Format(time.RFC3339))
	}
	if !j.CancelRequested.IsZero() {
		fmt.Fprintf(a.stdout, "cancel requested %s\n", j.CancelRequested.Local().Format(time.RFC3339))
	}
	if j.Error != "" {
		fmt.Fprintf(a.stdout, "error: %s\n", j.Error)
	}
	if len(tasks) > 0 {
		fmt.Fprintln(a.stdout, "\nTASKS")
		tw := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tVM\tHOST\tSTATUS\tMODE\tCONSISTENCY\tATTEMPTS\tREAD\tSTORED\tDURATION\tPOINT\tERROR")
		for _, t := range tasks {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.VMName, dash(t.Host), t.Status, t.Mode,
				taskConsistency(t), t.Attempts,
				humanBytes(t.BytesRead), humanBytes(t.BytesStored), duration(t.StartedAt, t.FinishedAt), dash(clip(t.BackupPointID, 12)), clip(t.Error, 60))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(events) > 0 {
		fmt.Fprintf(a.stdout, "\nEVENTS (log, %d lines)\n", len(events))
		for _, e := range events {
			task := ""
			if e.TaskID != 0 {
				task = fmt.Sprintf(" task %d", e.TaskID)
			}
			fmt.Fprintf(a.stdout, "%s %-5s %s%s: %s\n", e.Time.Local().Format("15:04:05.000"), e.Level, e.Kind, task, e.Message)
		}
	}
	return nil
}

// jobDoc is the --json form of a job (stable field names for scripts).
type jobDoc struct {
	ID         int64     `json:"id"`
	Kind       string    `json:"kind"`
	Policy     string    `json:"policy,omitempty"`
	Repository string    `json:"repository,omitempty"`
	Status     string    `json:"status"`
	Worker     string    `json:"worker,omitempty"`
	Started    time.Time `json:"started"`
	Finished   time.Time `json:"finished,omitzero"`
	Seconds    float64   `json:"duration_seconds"`
	TasksTotal int       `json:"tasks_total"`
	TasksOK    int       `json:"tasks_ok"`
	TasksFail  int       `json:"tasks_failed"`
	Error      string    `json:"error,omitempty"`
	// What the job acts on, who started it, its progress, the process
	// running it and a cancel request (schema version 3 on).
	Object          string       `json:"object,omitempty"`
	VM              string       `json:"vm,omitempty"`
	User            string       `json:"user,omitempty"`
	Token           string       `json:"token,omitempty"`
	Progress        *progressDoc `json:"progress,omitempty"`
	OwnerHost       string       `json:"owner_host,omitempty"`
	OwnerPID        int          `json:"owner_pid,omitempty"`
	Heartbeat       time.Time    `json:"heartbeat,omitzero"`
	CancelRequested time.Time    `json:"cancel_requested,omitzero"`
	LogLines        int64        `json:"log_lines"`
	Tasks           []taskDoc    `json:"tasks,omitempty"`
	Events          []eventDoc   `json:"events,omitempty"`
}

type progressDoc struct {
	BytesDone      int64   `json:"bytes_done"`
	BytesTotal     int64   `json:"bytes_total"`
	BytesPerSecond float64 `json:"bytes_per_second"`
	ETASeconds     float64 `json:"eta_seconds"`
	ItemsDone      int64   `json:"items_done"`
	ItemsTotal     int64   `json:"items_total"`
}

type taskDoc struct {
	ID           int64    `json:"id"`
	Connection   string   `json:"connection"`
	VMID         string   `json:"vm_id"`
	VMName       string   `json:"vm"`
	Host         string   `json:"host,omitempty"`
	Datastores   []string `json:"datastores,omitempty"`
	Status       string   `json:"status"`
	Mode         string   `json:"mode"`
	SnapshotMode string   `json:"snapshot_mode"`
	// SnapshotModeAchieved is its point's; absent while the task has none.
	SnapshotModeAchieved string    `json:"snapshot_mode_achieved,omitempty"`
	Attempts             int       `json:"attempts"`
	Started              time.Time `json:"started,omitzero"`
	Finished             time.Time `json:"finished,omitzero"`
	Seconds              float64   `json:"duration_seconds"`
	BytesLogical         int64     `json:"bytes_logical"`
	BytesRead            int64     `json:"bytes_read"`
	BytesStored          int64     `json:"bytes_stored"`
	BackupPointID        string    `json:"backup_point,omitempty"`
	Warnings             []string  `json:"warnings,omitempty"`
	Error                string    `json:"error,omitempty"`
}

type eventDoc struct {
	Seq     int64          `json:"seq"` // line number in the job's log
	Time    time.Time      `json:"time"`
	TaskID  int64          `json:"task_id,omitempty"`
	Level   string         `json:"level"`
	Kind    string         `json:"kind"`
	Message string         `json:"message"`
	Fields  map[string]any `json:"fields,omitempty"`
}

func jobJSON(j catalog.Job, tasks []catalog.Task, events []catalog.Event) jobDoc {
	d := jobDoc{ID: j.ID, Kind: j.Kind, Policy: j.Policy, Repository: j.Repository, Status: string(j.Status), Worker: j.Worker,
		Started: j.StartedAt, Finished: j.FinishedAt, Seconds: seconds(j.StartedAt, j.FinishedAt),
		TasksTotal: j.TasksTotal, TasksOK: j.TasksOK, TasksFail: j.TasksFail, Error: j.Error,
		Object: j.Object, VM: j.VM, User: j.User, Token: j.Token, OwnerHost: j.Owner.Host, OwnerPID: j.Owner.PID,
		Heartbeat: j.Heartbeat, CancelRequested: j.CancelRequested, LogLines: j.LogLines}
	if p := j.Progress; p != (catalog.Progress{}) {
		d.Progress = &progressDoc{BytesDone: p.BytesDone, BytesTotal: p.BytesTotal, BytesPerSecond: p.BytesPerSecond,
			ETASeconds: p.ETA.Seconds(), ItemsDone: p.ItemsDone, ItemsTotal: p.ItemsTotal}
	}
	for _, t := range tasks {
		d.Tasks = append(d.Tasks, taskDoc{ID: t.ID, Connection: t.Connection, VMID: t.VMID, VMName: t.VMName, Host: t.Host,
			Datastores: t.Datastores, Status: string(t.Status), Mode: t.Mode, SnapshotMode: t.SnapshotMode, Attempts: t.Attempts,
			Started: t.StartedAt, Finished: t.FinishedAt, Seconds: seconds(t.StartedAt, t.FinishedAt), BytesLogical: t.BytesLogical,
			BytesRead: t.BytesRead, BytesStored: t.BytesStored, BackupPointID: t.BackupPointID, Warnings: t.Warnings, Error: t.Error,
			SnapshotModeAchieved: taskAchieved(t)})
	}
	for _, e := range events {
		d.Events = append(d.Events, eventDoc{Seq: e.Seq, Time: e.Time, TaskID: e.TaskID, Level: e.Level, Kind: e.Kind, Message: e.Message, Fields: e.Fields})
	}
	return d
}

// taskAchieved is the achieved snapshot mode of a task's point: none
// without a point, "unknown" for a point recorded before coffer kept it.
func taskAchieved(t catalog.Task) string {
	if t.BackupPointID == "" {
		return ""
	}
	return achievedMode(t.SnapshotModeAchieved)
}

// taskConsistency is the CONSISTENCY column of a task: what its point
// holds ("-" while it has none).
func taskConsistency(t catalog.Task) string {
	if t.BackupPointID == "" {
		return "-"
	}
	return consistency(t.SnapshotMode, t.SnapshotModeAchieved)
}

func seconds(from, to time.Time) float64 {
	if from.IsZero() || to.IsZero() {
		return 0
	}
	return to.Sub(from).Seconds()
}

// jobDuration is a job's DURATION: its length, or how far a running job
// got.
func jobDuration(j catalog.Job) string {
	d := duration(j.StartedAt, j.FinishedAt)
	if p := j.Progress; d == "running" && p.BytesTotal > 0 {
		d += fmt.Sprintf(" %d%%", 100*min(p.BytesDone, p.BytesTotal)/p.BytesTotal)
	}
	return d
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

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}
