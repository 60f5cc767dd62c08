package console

import (
	"bytes"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/coffer-backup/coffer/internal/api"
)

// page is one request to the console: the route it matched and the API
// calls it may make.
type page struct {
	c     *Console
	w     http.ResponseWriter
	r     *http.Request
	route route
	api   *caller
}

// view is what the layout shows around a page's content.
type view struct {
	Title string
	Nav   string // the navigation entry to mark current
	User  string
	// Pending: the session still lacks its second step or an enrolment,
	// so the header offers no section (they would all refuse it).
	Pending bool
	Data    any
}

// htmx reports a request htmx sent for a fragment.
func (p *page) htmx() bool { return p.r.Header.Get("HX-Request") == "true" }

// show renders a whole page: the caller's name in the layout comes from
// the whoami operation (an expired session is sent to the sign-in page).
func (p *page) show(name, title, nav string, data any) {
	var me api.Caller
	if _, err := p.api.call("whoami", nil, nil, nil, &me); err != nil {
		p.fail(err)
		return
	}
	p.write(http.StatusOK, name, view{Title: title, Nav: nav, User: me.User, Data: data})
}

// fragment renders a part of a page for htmx ("page/fragment").
func (p *page) fragment(name string, data any) {
	p.write(http.StatusOK, name, data)
}

func (p *page) write(status int, name string, data any) {
	var buf bytes.Buffer
	if err := p.c.pages.render(&buf, name, data); err != nil {
		p.c.log.Error("console: rendering a page", "page", name, "err", err)
		http.Error(p.w, "the console could not render this page (logged by the server)", http.StatusInternalServerError)
		return
	}
	p.w.Header().Set("Content-Type", "text/html; charset=utf-8")
	p.w.WriteHeader(status)
	_, _ = p.w.Write(buf.Bytes())
}

// problem is what a refused or failed call shows.
type problem struct {
	Status  int
	Class   string
	Message string
	Denied  bool
}

// fail shows an error: a caller who is not signed in goes to the sign-in
// page; a refusal or a failure is shown where the action was (a fragment
// for htmx), or as a page of its own.
func (p *page) fail(err error) {
	ae := &apiError{Status: http.StatusInternalServerError, Class: api.Internal, Detail: err.Error()}
	errors.As(err, &ae)
	if ae.Class == api.Unauthenticated || ae.Status == http.StatusUnauthorized {
		p.toLogin()
		return
	}
	pr := problem{Status: ae.Status, Class: string(ae.Class), Message: ae.Detail, Denied: ae.Denied()}
	if p.htmx() {
		// htmx swaps 2xx answers only: the message is the answer.
		p.write(http.StatusOK, "error/message", pr)
		return
	}
	title := "It did not work"
	if pr.Denied {
		title = "Refused"
	}
	// The header keeps its navigation where the route may ask who the
	// caller is (every full page's may): a refusal is not a dead end.
	var me api.Caller
	if _, err := p.api.call("whoami", nil, nil, nil, &me); err != nil {
		me.User = ""
	}
	p.write(ae.Status, "error", view{Title: title, User: me.User, Data: pr})
}

// toLogin sends the browser to the sign-in page, coming back here after.
func (p *page) toLogin() {
	target := "/ui/login"
	if p.r.Method == http.MethodGet && p.r.URL.Path != "/ui/" {
		target += "?" + url.Values{"next": {p.r.URL.RequestURI()}}.Encode()
	}
	if p.htmx() {
		p.w.Header().Set("HX-Redirect", target)
		p.w.WriteHeader(http.StatusNoContent)
		return
	}
	http.Redirect(p.w, p.r, target, http.StatusSeeOther)
}

// done answers an action that succeeded: a message fragment for htmx, or
// back to the page for a plain form.
func (p *page) done(message, back string) {
	if p.htmx() {
		p.write(http.StatusOK, "error/done", message)
		return
	}
	http.Redirect(p.w, p.r, back, http.StatusSeeOther)
}

// redirect sends the browser to another page (htmx follows it whole).
func (p *page) redirect(target string) {
	if p.htmx() {
		p.w.Header().Set("HX-Redirect", target)
		p.w.WriteHeader(http.StatusNoContent)
		return
	}
	http.Redirect(p.w, p.r, target, http.StatusSeeOther)
}

// form reads a posted form (bounded: the console's forms are small).
func (p *page) form() url.Values {
	p.r.Body = http.MaxBytesReader(p.w, p.r.Body, 64<<10)
	_ = p.r.ParseForm()
	return p.r.PostForm
}

// intParam reads a positive integer from the query (0 when absent or bad).
func (p *page) intParam(name string) int64 {
	n, err := strconv.ParseInt(p.r.URL.Query().Get(name), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
