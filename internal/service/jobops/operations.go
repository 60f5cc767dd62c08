package jobops

import (
	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/service"
)

// seeJobs is who sees a job.
const seeJobs = "one's own jobs; everyone's with Sys.Audit on /system/tasks; a policy's runs with Policy.Audit on it, " +
	"a repository's or a media library's operations with Repo.Audit on it"

// Operations are this domain's rows of the operation table.
var Operations = []service.Operation{

	// Jobs, VMs and policies.
	{ID: "list-jobs", Method: "Jobs", Summary: "list jobs (the tasks of every long operation and policy run), newest first", HTTP: service.Get,
		Path: "/jobs", SelfService: seeJobs, Endpoint: service.ReturnsPage(Ops.Jobs)},
	{ID: "get-job", Method: "Job", Summary: "a job with a page of its per-VM tasks and the first lines of its log", HTTP: service.Get, Path: "/jobs/{id}",
		SelfService: seeJobs, Endpoint: service.Answers(Ops.Job)},
	{ID: "job-log", Method: "JobLog", Summary: "a page of a job's log", HTTP: service.Get, Path: "/jobs/{id}/log",
		SelfService: seeJobs, Endpoint: service.Returns(Ops.JobLog)},
	{ID: "follow-job", Method: "FollowJob", Summary: "follow a job: its state, log lines and progress as server-sent events", HTTP: service.Get,
		Path: "/jobs/{id}/events", SelfService: seeJobs, Endpoint: service.Events[api.FollowJobInput]{Data: api.JobEvent{}, Names: []string{"status", "progress", "log"}, Run: epFollowJob}},
	{ID: "cancel-job", Method: "CancelJob", Summary: "ask a queued or running job to stop, wherever it runs", HTTP: service.Post,
		Path: "/jobs/{id}/cancel", SelfService: "one's own jobs; everyone's with Sys.Modify on /system/tasks; a policy's runs with Policy.Run on it",
		Endpoint: service.Returns(Ops.CancelJob)},
}
