package console

import (
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"
	"regexp"

	"github.com/coffer-backup/coffer/internal/api"
)

// The Account page (one's own second factors) and the second step of
// signing in. A session waiting for its second step, or sent to enrol a
// second factor, reaches these pages and nothing else: the API refuses it
// every other operation.

// Session.Pending's values (auth's).
const (
	pendingSecondFactor = "second-factor"
	pendingEnrolment    = "enrolment"
)

type accountView struct {
	Me      api.Caller
	Factors api.SecondFactors
	// Enrolment is a TOTP enrolment under way: its QR code, URI and seed.
	Enrolment *enrolmentView
	// Codes are recovery codes just made, shown this once.
	Codes       []string
	Error, Done string
}

type enrolmentView struct {
	QR          template.URL // a data: URI of the PNG
	URI, Secret string
}

// account shows the caller's second factors.
func (p *page) account() { p.showAccount(accountView{}, http.StatusOK) }

func (p *page) showAccount(v accountView, status int) {
	if _, err := p.api.call("whoami", nil, nil, nil, &v.Me); err != nil {
		p.fail(err)
		return
	}
	if _, err := p.api.call("second-factors", map[string]string{"user": v.Me.User}, nil, nil, &v.Factors); err != nil {
		p.fail(err)
		return
	}
	if v.Error != "" && status == http.StatusOK {
		status = http.StatusBadRequest
	}
	p.write(status, "account", view{Title: "Your account", Nav: "account", User: v.Me.User, Pending: v.Me.Pending != "", Data: v})
}

// me is who calls, for the actions (a failure is shown).
func (p *page) me() (api.Caller, bool) {
	var me api.Caller
	if _, err := p.api.call("whoami", nil, nil, nil, &me); err != nil {
		p.fail(err)
		return me, false
	}
	return me, true
}

// enrolTOTP starts a TOTP enrolment and shows its QR code.
func (p *page) enrolTOTP() {
	me, ok := p.me()
	if !ok {
		return
	}
	var en api.TOTPEnrolment
	if _, err := p.api.call("enrol-totp", map[string]string{"user": me.User}, nil, nil, &en); err != nil {
		p.showAccount(accountView{Error: err.Error()}, statusOf(err))
		return
	}
	qr := "data:image/png;base64," + base64.StdEncoding.EncodeToString(en.QRCodePNG)
	p.showAccount(accountView{Enrolment: &enrolmentView{QR: template.URL(qr), URI: en.URI, Secret: en.Secret}}, http.StatusOK)
}

// qrDataURI is what the confirmation form sends back of the QR code: a
// base64 PNG and nothing else, before the page shows it again.
var qrDataURI = regexp.MustCompile(`^data:image/png;base64,[A-Za-z0-9+/]+=*$`)

// confirmTOTP completes the enrolment with the app's first code and shows
// the recovery codes; a wrong code shows the enrolment again.
func (p *page) confirmTOTP() {
	f := p.form()
	me, ok := p.me()
	if !ok {
		return
	}
	var rc api.RecoveryCodes
	h, err := p.api.call("confirm-totp", map[string]string{"user": me.User}, nil, api.CodeRequest{Code: f.Get("code")}, &rc)
	if err != nil {
		en := &enrolmentView{URI: f.Get("uri"), Secret: f.Get("secret")}
		if qr := f.Get("qr"); qrDataURI.MatchString(qr) {
			en.QR = template.URL(qr)
		}
		p.retryAfter(h)
		p.showAccount(accountView{Enrolment: en, Error: err.Error()}, statusOf(err))
		return
	}
	p.showAccount(accountView{Codes: rc.Codes, Done: "Your authenticator app is set up."}, http.StatusOK)
}

func (p *page) removeTOTP() {
	me, ok := p.me()
	if !ok {
		return
	}
	if _, err := p.api.call("remove-totp", map[string]string{"user": me.User}, nil, nil, nil); err != nil {
		p.showAccount(accountView{Error: err.Error()}, statusOf(err))
		return
	}
	p.showAccount(accountView{Done: "Your authenticator app is removed."}, http.StatusOK)
}

func (p *page) regenerateCodes() {
	me, ok := p.me()
	if !ok {
		return
	}
	var rc api.RecoveryCodes
	if _, err := p.api.call("regenerate-recovery-codes", map[string]string{"user": me.User}, nil, nil, &rc); err != nil {
		p.showAccount(accountView{Error: err.Error()}, statusOf(err))
		return
	}
	p.showAccount(accountView{Codes: rc.Codes, Done: "New recovery codes: the old ones no longer work."}, http.StatusOK)
}

type secondStepView struct {
	Next, Error string
}

// secondStepPage asks a session waiting for its second step for a code.
func (p *page) secondStepPage() {
	v := secondStepView{Next: p.r.URL.Query().Get("next")}
	p.write(http.StatusOK, "secondfactor", view{Title: "Second step", Data: v})
}

// secondStep takes the code (TOTP or recovery) through the API.
func (p *page) secondStep() {
	f := p.form()
	v := secondStepView{Next: f.Get("next")}
	if h, err := p.api.call("verify-second-factor", nil, nil, api.CodeRequest{Code: f.Get("code")}, nil); err != nil {
		p.retryAfter(h)
		v.Error = err.Error()
		p.write(statusOf(err), "secondfactor", view{Title: "Second step", Data: v})
		return
	}
	http.Redirect(p.w, p.r, localTarget(v.Next), http.StatusSeeOther)
}

// afterPassword sends a session the password opened where it must go
// next: the second step, the enrolment, or the page asked for.
func (p *page) afterPassword(pending, next string) {
	target := localTarget(next)
	switch pending {
	case pendingSecondFactor:
		target = "/ui/login/second-factor?" + url.Values{"next": {target}}.Encode()
	case pendingEnrolment:
		target = "/ui/account"
	}
	http.Redirect(p.w, p.r, target, http.StatusSeeOther)
}

// retryAfter passes a throttle's Retry-After on to the browser.
func (p *page) retryAfter(h http.Header) {
	if ra := h.Get("Retry-After"); ra != "" {
		p.w.Header().Set("Retry-After", ra)
	}
}

func statusOf(err error) int {
	if ae, ok := err.(*apiError); ok && ae.Status >= 400 {
		return ae.Status
	}
	return http.StatusInternalServerError
}
