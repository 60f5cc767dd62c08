package job

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
)

// Get returns a job.
func (m *Manager) Get(ctx context.Context, id int64) (Record, error) {
	return m.cat.GetJob(ctx, id)
}

// Filter selects jobs for List; zero fields match everything.
type Filter struct {
	Kind   string
	Status Status
	Policy string
	VM     string // a VM's name or ID: jobs on it, and policy runs that backed it up
	User   string
	Object string
	Since  time.Time // created at or after
	Until  time.Time // created before
	// Cursor continues a listing: the Next of the previous page.
	Cursor string
	Limit  int // default 50, at most 1000
}

// Page is one page of a listing, newest first; Next is the cursor of the
// following page, "" after the last.
type Page struct {
	Tasks []Record
	Next  string
}

// List lists jobs newest first, a page at a time.
func (m *Manager) List(ctx context.Context, f Filter) (Page, error) {
	switch {
	case f.Limit == 0:
		f.Limit = 50
	case f.Limit < 0 || f.Limit > 1000:
		return Page{}, fmt.Errorf("%w: limit %d: a page holds 1 to 1000 tasks", ErrInvalid, f.Limit)
	}
	after, err := parseCursor(f.Cursor)
	if err != nil {
		return Page{}, err
	}
	jobs, err := m.cat.ListJobs(ctx, catalog.JobFilter{Kind: f.Kind, Status: f.Status, Policy: f.Policy, VM: f.VM,
		User: f.User, Object: f.Object, Since: f.Since, Until: f.Until, After: after, Limit: f.Limit + 1})
	if err != nil {
		return Page{}, err
	}
	p := Page{Tasks: jobs}
	if len(jobs) > f.Limit {
		p.Tasks = jobs[:f.Limit]
		p.Next = formatCursor(p.Tasks[f.Limit-1].Cursor())
	}
	if p.Tasks == nil {
		p.Tasks = []Record{}
	}
	return p, nil
}

// A cursor is "<created, µs since the epoch>.<ID>" of a page's last job.
func formatCursor(c catalog.JobCursor) string {
	return strconv.FormatInt(c.CreatedAt.UnixMicro(), 10) + "." + strconv.FormatInt(c.ID, 10)
}

func parseCursor(s string) (catalog.JobCursor, error) {
	if s == "" {
		return catalog.JobCursor{}, nil
	}
	us, id, ok := strings.Cut(s, ".")
	t, err1 := strconv.ParseInt(us, 10, 64)
	n, err2 := strconv.ParseInt(id, 10, 64)
	if !ok || err1 != nil || err2 != nil || n <= 0 {
		return catalog.JobCursor{}, fmt.Errorf("%w: cursor %q is not one this server handed out: pass the next value of the previous page, or none for the first", ErrInvalid, s)
	}
	return catalog.JobCursor{CreatedAt: time.UnixMicro(t).UTC(), ID: n}, nil
}

// Log returns lines of a job's log in order: those after line start (0:
// from the first), at most limit (default 500, at most 10000). The next
// page starts at the last line's Seq.
func (m *Manager) Log(ctx context.Context, id, start int64, limit int) ([]Line, error) {
	switch {
	case limit == 0:
		limit = 500
	case limit < 0 || limit > 10000:
		return nil, fmt.Errorf("%w: limit %d: a page holds 1 to 10000 lines", ErrInvalid, limit)
	}
	if start < 0 {
		return nil, fmt.Errorf("%w: start %d: lines are numbered from 1, start after line 0 or later", ErrInvalid, start)
	}
	lines, err := m.cat.JobLog(ctx, id, start, limit)
	if err != nil {
		return nil, err
	}
	if len(lines) == 0 {
		if _, err := m.cat.GetJob(ctx, id); err != nil {
			return nil, err
		}
		lines = []Line{}
	}
	return lines, nil
}
