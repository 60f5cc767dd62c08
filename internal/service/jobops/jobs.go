package jobops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"cmp"
	"context"
	"strconv"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
)

// Jobs as the API lists, pages, follows and cancels them, and who sees
// which.

// jobsPage is the size of a page of jobs unless the request says.
const jobsPage = 100

// Jobs lists a page of the jobs the caller may see. The catalog is read a
// page at a time (a catalog holds millions of jobs); jobs the caller may
// not see are left out of the page, so a page may be short while more
// follow: the cursor of the next page says whether they do.
func (s Ops) Jobs(ctx context.Context, in *api.ListJobsInput) ([]api.Job, string, error) {
	limit := cmp.Or(in.Limit, jobsPage)
	jobs, err := s.ListJobs(ctx, in, limit)
	if err != nil {
		return nil, "", err
	}
	actor := s.Actor(ctx)
	page := []api.Job{}
	for _, j := range jobs {
		if canSeeJob(actor, j) {
			page = append(page, j)
		}
	}
	next := ""
	if len(jobs) == limit {
		next = strconv.FormatInt(jobs[len(jobs)-1].ID, 10)
	}
	return page, next, nil
}

// JobDetail is a job with a page of its tasks and the first lines of its
// log; tasks_total and log_lines say how many there are.
type JobDetail struct {
	Body *api.Job
	Next string `header:"Coffer-Next" doc:"present when more tasks may follow: pass it as tasks_after"`
}

// jobDetailPage is the tasks and lines of a job document unless the
// request says.
const jobDetailPage = 100

// Job is a job the caller may see with a page of its tasks and the first
// lines of its log.
func (s Ops) Job(ctx context.Context, in *api.GetJobInput) (*JobDetail, error) {
	if _, err := visibleJob(ctx, s, in.ID); err != nil {
		return nil, err
	}
	tasks := cmp.Or(in.Tasks, jobDetailPage)
	j, err := s.JobPage(ctx, service.JobPageInput{ID: in.ID, Tasks: tasks, TasksAfter: in.TasksAfter, Log: cmp.Or(in.Log, jobDetailPage)})
	if err != nil {
		return nil, err
	}
	out := &JobDetail{Body: j}
	if len(j.Tasks) == tasks {
		out.Next = strconv.FormatInt(j.Tasks[len(j.Tasks)-1].ID, 10)
	}
	return out, nil
}

// TasksPath is where rights on every user's jobs are held (PBS's
// /system/tasks): Sys.Audit to see them, Sys.Modify to cancel them.
const TasksPath = auth.SystemPath + "/tasks"

// canSeeJob: one's own jobs, everyone's with Sys.Audit on /system/tasks,
// and those on what one may audit: a policy's runs with Policy.Audit on
// it, a repository's or a media library's operations with Repo.Audit on
// it.
func canSeeJob(actor *auth.Subject, j api.Job) bool {
	switch {
	case actor != nil && j.User != "" && j.User == actor.User:
		return true
	case auth.Allowed(actor, TasksPath, auth.SysAudit):
		return true
	case j.Policy != "":
		return auth.Allowed(actor, auth.PolicyPath(j.Policy), auth.PolicyAudit)
	case strings.HasPrefix(j.Object, auth.RepositoriesPath+"/"), j.Object == auth.MediaPath, strings.HasPrefix(j.Object, auth.MediaPath+"/"):
		return auth.Allowed(actor, j.Object, auth.RepoAudit)
	}
	return auth.Allowed(actor, auth.PoliciesPath, auth.PolicyAudit) && j.Object == ""
}

// canCancelJob: one's own jobs, everyone's with Sys.Modify on
// /system/tasks, a policy's runs with Policy.Run on it.
func canCancelJob(actor *auth.Subject, j api.Job) bool {
	switch {
	case actor != nil && j.User != "" && j.User == actor.User:
		return true
	case auth.Allowed(actor, TasksPath, auth.SysModify):
		return true
	case j.Policy != "":
		return auth.Allowed(actor, auth.PolicyPath(j.Policy), auth.PolicyRun)
	}
	return false
}

// visibleJob fetches a job the caller may see (denied otherwise), without
// its tasks and log: a policy run's are thousands of rows.
func visibleJob(ctx context.Context, s Ops, id int64) (*api.Job, error) {
	j, err := s.JobSummary(ctx, id)
	if err != nil {
		return nil, err
	}
	if !canSeeJob(s.Actor(ctx), *j) {
		return nil, api.Errorf(api.Denied, "%s may not see job %d: it is another user's, and %s lacks the audit privilege on %s",
			s.Actor(ctx), j.ID, s.Actor(ctx), cmp.Or(j.Object, auth.PolicyPath(j.Policy)))
	}
	return j, nil
}

// epFollowJob streams a job's events; a log line's event ID is its line
// number, so a client that reconnects with Last-Event-ID misses none.
func epFollowJob(ctx context.Context, svc *service.Service, in *api.FollowJobInput, last int64, send func(string, int64, any) error) error {
	s := Ops{svc}
	if _, err := visibleJob(ctx, s, in.ID); err != nil {
		return err
	}
	after := max(in.After, last)
	return s.FollowJob(ctx, in.ID, after, func(ev api.JobEvent) error {
		var id int64
		if ev.Line != nil {
			id = ev.Line.Seq
		}
		return send(ev.Type, id, ev)
	})
}

// Document is what an in-process call returns of the answer.
func (d *JobDetail) Document() (any, string) { return d.Body, d.Next }
