package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
)

// The tasks: a list with filters, pages of pageSize, and each task with
// its live log, progress and cancel.

const (
	pageSize = 50
	// logTail is how much of a log the task page shows at first: the
	// end of it, the rest is in the download.
	logTail = 500
)

type tasksView struct {
	Filter tasksFilter
	Kinds  []string
	Tasks  []api.Job
	Next   string
}

type tasksFilter struct {
	Kind, Status, Policy, VM, User, Since string
}

// sinceChoices are the time windows the list offers.
var sinceChoices = map[string]time.Duration{"24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "30d": 30 * 24 * time.Hour}

var taskKinds = []string{"backup-policy", "backup-vm", "backup-disk", "restore", "restore-vm", "restore-files", "verify", "gc",
	"forget", "copy", "instant", "repair", "cleanup"}

func (p *page) tasks() {
	q := p.r.URL.Query()
	f := tasksFilter{Kind: q.Get("kind"), Status: q.Get("status"), Policy: q.Get("policy"), VM: q.Get("vm"), User: q.Get("user"), Since: q.Get("since")}
	api := url.Values{"limit": {strconv.Itoa(pageSize)}}
	for k, v := range map[string]string{"kind": f.Kind, "status": f.Status, "policy": f.Policy, "vm": f.VM, "user": f.User} {
		if v != "" {
			api.Set(k, v)
		}
	}
	if d, ok := sinceChoices[f.Since]; ok {
		api.Set("since", time.Now().Add(-d).UTC().Format(time.RFC3339))
	}
	if after := p.intParam("after"); after > 0 {
		api.Set("after", strconv.FormatInt(after, 10))
	}
	v := tasksView{Filter: f, Kinds: taskKinds}
	h, err := p.api.call("list-jobs", nil, api, nil, &v.Tasks)
	if err != nil {
		p.fail(err)
		return
	}
	// The API's keyset cursor: the next page continues after the last
	// job of this one, stable while new jobs are added.
	if cursor := h.Get("Coffer-Next"); cursor != "" {
		next := p.r.URL.Query()
		next.Del("before")
		next.Set("after", cursor)
		v.Next = "/ui/tasks?" + next.Encode()
	}
	if p.htmx() && p.r.Header.Get("HX-Target") == "task-list" {
		p.fragment("tasks/list", v)
		return
	}
	p.show("tasks", "Tasks", "tasks", v)
}

type taskView struct {
	Job       api.Job
	Log       []api.Event
	LogFrom   int64 // the first line shown
	LastLine  int64
	Finished  bool
	CancelReq bool
}

func (p *page) taskID() (string, bool) {
	id := p.r.PathValue("id")
	if n, err := strconv.ParseInt(id, 10, 64); err != nil || n < 1 {
		p.fail(&apiError{Status: http.StatusNotFound, Class: api.NotFound, Detail: fmt.Sprintf("no task %q: tasks are numbered from 1", id)})
		return "", false
	}
	return id, true
}

func (p *page) task() {
	id, ok := p.taskID()
	if !ok {
		return
	}
	var v taskView
	if _, err := p.api.call("get-job", map[string]string{"id": id}, nil, nil, &v.Job); err != nil {
		p.fail(err)
		return
	}
	v.Job.Events = nil // the log comes in pages below
	v.LogFrom = max(0, v.Job.LogLines-logTail)
	if _, err := p.api.call("job-log", map[string]string{"id": id}, url.Values{"start": {strconv.FormatInt(v.LogFrom, 10)},
		"limit": {strconv.Itoa(logTail)}}, nil, &v.Log); err != nil {
		p.fail(err)
		return
	}
	v.LastLine = v.LogFrom
	if n := len(v.Log); n > 0 {
		v.LastLine = v.Log[n-1].Seq
	}
	v.Finished = finished(v.Job.Status)
	v.CancelReq = !v.Job.CancelRequested.IsZero()
	title := fmt.Sprintf("Task %d: %s", v.Job.ID, v.Job.Kind)
	p.show("task", title, "tasks", v)
}

func finished(status string) bool {
	return status != "running" && status != "queued"
}

// taskEvents relays the task's events (follow-job) to the browser as
// server-sent events of HTML for htmx's SSE extension: "status" (the
// badge), "progress" (the bar), "log" (a line), and "end" when the task
// has ended, on which the page closes the stream.
func (p *page) taskEvents() {
	id, ok := p.taskID()
	if !ok {
		return
	}
	q := url.Values{}
	if after := p.r.URL.Query().Get("after"); after != "" {
		q.Set("after", after)
	}
	rc := http.NewResponseController(p.w)
	started := false
	send := func(event, id string, fragment string, data any) error {
		var buf bytes.Buffer
		if err := p.c.pages.render(&buf, fragment, data); err != nil {
			return err
		}
		if !started {
			started = true
			p.w.Header().Set("Content-Type", "text/event-stream")
			p.w.WriteHeader(http.StatusOK)
		}
		var msg strings.Builder
		msg.WriteString("event: " + event + "\n")
		if id != "" {
			msg.WriteString("id: " + id + "\n")
		}
		for _, line := range strings.Split(strings.TrimRight(buf.String(), "\n"), "\n") {
			msg.WriteString("data: " + line + "\n")
		}
		msg.WriteString("\n")
		if _, err := p.w.Write([]byte(msg.String())); err != nil {
			return err
		}
		return rc.Flush()
	}
	err := p.api.events("follow-job", map[string]string{"id": id}, q, p.r.Header.Get("Last-Event-ID"), func(event, eid string, data []byte) error {
		var ev api.JobEvent
		if err := json.Unmarshal(data, &ev); err != nil {
			return err
		}
		switch {
		case ev.Line != nil:
			return send("log", eid, "task/line", ev.Line)
		case ev.Job != nil:
			if err := send("progress", "", "task/jobprogress", ev.Job); err != nil {
				return err
			}
			if err := send("status", "", "task/jobstatus", ev.Job); err != nil {
				return err
			}
			if finished(ev.Job.Status) {
				return send("end", "", "task/ended", ev.Job)
			}
		}
		return nil
	})
	if err != nil && !started {
		p.fail(err)
		return
	}
	if err != nil && p.r.Context().Err() == nil {
		p.c.log.Warn("console: a task's event stream ended", "task", id, "err", err)
	}
}

// cancelTask asks the task to stop (cancel-job).
func (p *page) cancelTask() {
	id, ok := p.taskID()
	if !ok {
		return
	}
	var j api.Job
	if _, err := p.api.call("cancel-job", map[string]string{"id": id}, nil, nil, &j); err != nil {
		p.fail(err)
		return
	}
	p.done("Cancel requested: the task stops at its next step.", "/ui/tasks/"+id)
}

// taskLog downloads the whole log as text, read page by page.
func (p *page) taskLog() {
	id, ok := p.taskID()
	if !ok {
		return
	}
	const page = 10000
	var start int64
	started := false
	for {
		var lines []api.Event
		if _, err := p.api.call("job-log", map[string]string{"id": id}, url.Values{"start": {strconv.FormatInt(start, 10)},
			"limit": {strconv.Itoa(page)}}, nil, &lines); err != nil {
			if !started {
				p.fail(err)
			}
			return
		}
		if !started {
			started = true
			p.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			p.w.Header().Set("Content-Disposition", `attachment; filename="coffer-task-`+id+`.log"`)
		}
		var b strings.Builder
		for _, l := range lines {
			fmt.Fprintf(&b, "%d %s %s %s\n", l.Seq, l.Time.UTC().Format(time.RFC3339Nano), l.Level, l.Message)
		}
		if _, err := p.w.Write([]byte(b.String())); err != nil {
			return
		}
		if len(lines) < page {
			return
		}
		start = lines[len(lines)-1].Seq
	}
}
