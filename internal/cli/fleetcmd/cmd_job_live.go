package fleetcmd

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/apiclient"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/jobops"
)

// A job's log, its live events and its cancel: every long operation and
// policy run is a task of the catalog, so these reach it from any process
// (here, or through a server with --server).

func jobID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, command.Usagef("job ID %q is not a number", s)
	}
	return id, nil
}

func (a *app) cmdJobLog() *cobra.Command {
	var in api.JobLogInput
	cmd := &cobra.Command{
		Use:   "log ID",
		Short: "print a page of a job's log",
		Long: command.Manual(`Print a job's log, a page at a time: the lines after --start (0: from
the first), at most --limit. The next page starts at the last line's
number.`,
			"One line per log line: number, time, level, message. --json: a list of {seq, time, task_id, level, kind, message, fields}.",
			"coffer job log 42\ncoffer job log 42 --start 500 --limit 500 --json", "0; 7 for an unknown job."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if in.ID, err = jobID(args[0]); err != nil {
				return err
			}
			lines, err := command.RunOp[[]api.Event](cmd.Context(), a.App, "job-log", &in)
			if err != nil {
				return err
			}
			return a.Emit(lines, nil, func() {
				for _, l := range lines {
					a.Printf("%s\n", logLine(l))
				}
			})
		},
	}
	cmd.Flags().Int64Var(&in.Start, "start", 0, "the last line already read")
	cmd.Flags().IntVar(&in.Limit, "limit", 500, "the most lines")
	return command.RemoteToo(command.Op(cmd, "job-log"))
}

func logLine(l api.Event) string {
	return fmt.Sprintf("%6d %s %-5s %s", l.Seq, l.Time.Local().Format("15:04:05"), l.Level, l.Message)
}

func (a *app) cmdJobFollow() *cobra.Command {
	var in api.FollowJobInput
	cmd := &cobra.Command{
		Use:   "follow ID",
		Short: "follow a job: its log and state as they are recorded, until it ends",
		Long: command.Manual(`Follow a job wherever it runs: its state, then its log from the line
after --after, then every line and change as it is recorded, until it
ends.`,
			"Log lines as they come, and the job's state when it changes. --json: one job event document per line ({type, job_id, job, line}).",
			"coffer job follow 42\ncoffer --server https://backup:8443 job follow 42", "0 when the job has ended; 7 for an unknown job."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var err error
			if in.ID, err = jobID(args[0]); err != nil {
				return err
			}
			show := func(ev api.JobEvent) error {
				if a.JSON {
					return json.NewEncoder(a.Stdout).Encode(ev)
				}
				switch {
				case ev.Line != nil:
					a.Printf("%s\n", logLine(*ev.Line))
				case ev.Type == "status" && ev.Job != nil:
					a.Printf("job %d: %s %s\n", ev.Job.ID, ev.Job.Status, ev.Job.Error)
				}
				return nil
			}
			// The events come as they happen: a stream, which the service
			// method sends here, or the server as server-sent events.
			if a.Remote != nil {
				r, err := apiclient.RequestOf("follow-job", &in)
				if err != nil {
					return err
				}
				return a.Remote.Events(cmd.Context(), a.RemoteRequest(r), func(_ string, data []byte) error {
					var ev api.JobEvent
					if err := json.Unmarshal(data, &ev); err != nil {
						return err
					}
					return show(ev)
				})
			}
			_, err = command.Call(a.App, func(s *service.Service) (struct{}, error) {
				return struct{}{}, jobops.Ops{Service: s}.FollowJob(cmd.Context(), in.ID, in.After, show)
			})
			return err
		},
	}
	cmd.Flags().Int64Var(&in.After, "after", 0, "the last log line already read")
	return command.RemoteToo(command.Op(cmd, "follow-job"))
}

func (a *app) cmdJobCancel() *cobra.Command {
	return command.RemoteToo(command.Op(&cobra.Command{
		Use:   "cancel ID",
		Short: "ask a queued or running job to stop, wherever it runs",
		Long: command.Manual(`Ask a job to stop: the request is recorded in the catalog and reaches the
job in whichever process runs it (at once here, within a second or so
elsewhere); running VMs release their snapshots, and the job ends as
cancelled. A job whose process died is marked cancelled at once.`,
			`"cancel requested". --json: the job document as it is then.`,
			"coffer job cancel 42", "0; 7 for an unknown job; 2 when it has already ended."),
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := jobID(args[0])
			if err != nil {
				return err
			}
			j, err := command.RunOp[*api.Job](cmd.Context(), a.App, "cancel-job", &api.CancelJobInput{JobParam: api.JobParam{ID: id}})
			if err != nil {
				return err
			}
			return a.Emit(j, nil, func() { a.Printf("job %d: cancel requested (%s)\n", j.ID, j.Status) })
		},
	}, "cancel-job"))
}
