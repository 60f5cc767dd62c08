package console

import (
	"net/http"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
)

// The sign-in, sign-out and first-run pages.

type loginView struct {
	User, Next, Error, Message string
	// The realm chosen, the password realms, the OIDC realms' buttons.
	Realm             string
	Realms, Providers []Realm
}

// withRealms fills in the realms of the sign-in page.
func (p *page) withRealms(v loginView) loginView {
	if p.c.cfg.Realms == nil {
		return v
	}
	for _, r := range p.c.cfg.Realms() {
		if r.OIDC {
			v.Providers = append(v.Providers, r)
		} else {
			v.Realms = append(v.Realms, r)
		}
	}
	return v
}

func (p *page) loginPage() {
	q := p.r.URL.Query()
	v := loginView{User: q.Get("user"), Next: q.Get("next"), Error: q.Get("failed")}
	// A session the password opened goes on to its second step or its
	// enrolment (every page sends a refused caller here).
	var me api.Caller
	if _, err := p.api.call("whoami", nil, nil, nil, &me); err == nil && me.Pending != "" {
		p.afterPassword(me.Pending, v.Next)
		return
	}
	if q.Has("signed-out") {
		v.Message = "You are signed out."
	}
	p.write(http.StatusOK, "login", view{Title: "Sign in", Data: p.withRealms(v)})
}

// login signs in through the login operation and hands its session
// cookie to the browser.
func (p *page) login() {
	f := p.form()
	v := loginView{User: f.Get("user"), Next: f.Get("next"), Realm: f.Get("realm")}
	var sess api.Session
	h, err := p.api.call("login", nil, nil, api.LoginRequest{User: v.User, Password: f.Get("password"), Realm: v.Realm}, &sess)
	if err != nil {
		ae, _ := err.(*apiError)
		status := http.StatusUnauthorized
		if ae != nil {
			status = ae.Status
			if ra := h.Get("Retry-After"); ra != "" {
				p.w.Header().Set("Retry-After", ra)
			}
		}
		v.Error = err.Error()
		p.write(status, "login", view{Title: "Sign in", Data: p.withRealms(v)})
		return
	}
	for _, c := range h.Values("Set-Cookie") {
		p.w.Header().Add("Set-Cookie", c)
	}
	p.afterPassword(sess.Pending, v.Next)
}

// localTarget keeps a redirect inside the console: anything else (another
// site, a scheme-relative URL) goes to the dashboard.
func localTarget(next string) string {
	if strings.HasPrefix(next, "/ui/") && !strings.HasPrefix(next, "/ui//") && !strings.ContainsAny(next, "\\\r\n") {
		return next
	}
	return "/ui/"
}

// logout ends the session through the logout operation.
func (p *page) logout() {
	h, err := p.api.call("logout", nil, nil, nil, nil)
	if err != nil {
		p.fail(err)
		return
	}
	for _, c := range h.Values("Set-Cookie") {
		p.w.Header().Add("Set-Cookie", c)
	}
	http.Redirect(p.w, p.r, "/ui/login?signed-out", http.StatusSeeOther)
}

type setupView struct {
	Token, Error, Done string
}

// setupPage is where a one-time setup link leads
// (/ui/setup#coffersetup_...): coffer.js moves the token from the
// fragment, which no proxy or log sees, into the form.
func (p *page) setupPage() {
	p.write(http.StatusOK, "setup", view{Title: "Choose your password", Data: setupView{}})
}

func (p *page) setup() {
	f := p.form()
	v := setupView{Token: f.Get("token")}
	switch {
	case f.Get("password") != f.Get("again"):
		v.Error = "The two passwords differ: type the same one twice."
	case v.Token == "":
		v.Error = "This page needs the whole setup link, with the part after #: open the link you were given again."
	default:
		var done api.SetupDone
		if _, err := p.api.call("complete-setup", nil, nil, api.SetupRequest{Token: v.Token, Password: f.Get("password")}, &done); err != nil {
			v.Error = err.Error()
		} else if p.signInAfterSetup(done.User, f.Get("password")) {
			return
		} else {
			v = setupView{Done: done.User}
		}
	}
	status := http.StatusOK
	if v.Error != "" {
		status = http.StatusBadRequest
	}
	p.write(status, "setup", view{Title: "Choose your password", Data: v})
}

// signInAfterSetup signs the user who has just chosen a password in, as
// the sign-in page would, and leads them to the dashboard: asking them to
// type it again at once would only test their memory. False (the setup
// page then links to the sign-in page) if the sign-in is refused.
func (p *page) signInAfterSetup(user, password string) bool {
	var sess api.Session
	h, err := p.api.call("login", nil, nil, api.LoginRequest{User: user, Password: password}, &sess)
	if err != nil {
		return false
	}
	for _, c := range h.Values("Set-Cookie") {
		p.w.Header().Add("Set-Cookie", c)
	}
	p.afterPassword(sess.Pending, "/ui/")
	return true
}
