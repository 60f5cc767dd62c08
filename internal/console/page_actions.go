package console

import (
	"net/url"

	"github.com/coffer-backup/coffer/internal/console/actions"
)

// actionRoutes are the routes of package actions, served as the
// console's own: with its guard, templates and API caller.
func actionRoutes() []route {
	var out []route
	for _, a := range actions.Routes() {
		out = append(out, route{a.Pattern, a.Ops, func(p *page) { a.Handle(actionPage{p}) }})
	}
	return out
}

// actionPage is a page as package actions sees it (actions.Page).
type actionPage struct{ p *page }

func (a actionPage) Call(op string, params map[string]string, query url.Values, body, out any) error {
	_, err := a.p.api.call(op, params, query, body, out)
	return err
}

func (a actionPage) StartTask(op string, params map[string]string, query url.Values, body, out any) (int64, error) {
	return a.p.startTask(op, params, query, body, out)
}

func (a actionPage) Form() url.Values         { return a.p.form() }
func (a actionPage) Value(name string) string { return a.p.r.PathValue(name) }
func (a actionPage) HTMX() bool               { return a.p.htmx() }
func (a actionPage) Repositories() []string   { return a.p.c.cfg.Repositories(a.p.r.Context()) }

func (a actionPage) Show(template, title, nav string, data any) { a.p.show(template, title, nav, data) }
func (a actionPage) Fragment(template string, data any)         { a.p.fragment(template, data) }
func (a actionPage) Done(message, back string)                  { a.p.done(message, back) }
func (a actionPage) Started(id int64, err error, done string)   { a.p.started(id, err, done) }
func (a actionPage) Fail(err error)                             { a.p.fail(err) }
