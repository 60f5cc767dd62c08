package console

import (
	"context"
	"errors"
	"net/url"
	"strconv"

	"github.com/coffer-backup/coffer/internal/taskstarted"
)

// startTask calls a long operation (a restore, instant recovery's commit)
// so that it goes on after this request's answer, and returns once the
// operation has recorded its task (its ID: the browser follows the task's
// live page) or has ended without one. What the operation refuses before
// it starts (its input, a privilege, a target that exists) comes back as
// the error, to be shown at the wizard's step; what fails later is in the
// task's status and log, like any task's.
//
// The API's answer is the operation's whole result and comes at its end;
// a browser cannot hold a request open for a restore of hours, so the
// call runs detached from the request (with its values: the session, the
// address) and the service names the task as it starts
// (taskstarted.With).
func (p *page) startTask(op string, params map[string]string, query url.Values, body, out any) (int64, error) {
	started := make(chan int64, 1)
	ended := make(chan error, 1)
	ctx := taskstarted.With(context.WithoutCancel(p.r.Context()), func(id int64) { started <- id })
	c := p.api.detached(ctx)
	go func() {
		_, err := c.call(op, params, query, body, out)
		ended <- err
	}()
	select {
	case id := <-started:
		return id, nil
	case err := <-ended:
		select {
		case id := <-started: // it started, then ended at once: its page says how
			return id, nil
		default:
		}
		if err == nil {
			// Done with no task recorded (the catalog could not be
			// opened): the operation ran and its answer is in out.
			return 0, nil
		}
		return 0, err
	case <-p.r.Context().Done():
		return 0, errors.New("the browser left before the operation started")
	}
}

// toTask sends the browser to a task's live page.
func (p *page) toTask(id int64) {
	p.redirect("/ui/tasks/" + strconv.FormatInt(id, 10))
}
