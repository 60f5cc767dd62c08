package console

import (
	"encoding/base64"
	"encoding/json"
	"html/template"
	"maps"
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
	p.factorAction("remove-totp", nil, nil, "Your authenticator app is removed.")
}

func (p *page) regenerateCodes() {
	p.factorAction("regenerate-recovery-codes", nil, nil, "New recovery codes: the old ones no longer work.")
}

// addSecurityKey completes a security key's registration: the page's script had
// the key answer the server's challenge, and put its answer in the form.
func (p *page) addSecurityKey() {
	f := p.form()
	body := api.SecurityKeyRegistration{Name: f.Get("name"), Credential: answer(f.Get("credential"))}
	p.factorAction("register-security-key", nil, body, "Your security key is added.")
}

func (p *page) removeSecurityKey() {
	p.factorAction("remove-security-key", map[string]string{"id": p.form().Get("id")}, nil, "The security key is removed.")
}

// factorAction runs op on the caller's account and shows the page again,
// with the recovery codes op made (shown this once).
func (p *page) factorAction(op string, params map[string]string, body any, done string) {
	me, ok := p.me()
	if !ok {
		return
	}
	params = maps.Clone(params)
	if params == nil {
		params = map[string]string{}
	}
	params["user"] = me.User
	var rc api.RecoveryCodes
	if _, err := p.api.call(op, params, nil, body, &rc); err != nil {
		p.showAccount(accountView{Error: err.Error()}, statusOf(err))
		return
	}
	p.showAccount(accountView{Codes: rc.Codes, Done: done}, http.StatusOK)
}

// answer reads a security key's answer the page's script put in a form
// (empty when it put none: the API says what is missing).
func answer(js string) map[string]any {
	var out map[string]any
	_ = json.Unmarshal([]byte(js), &out)
	return out
}

type secondStepView struct {
	Next, Error string
	// Keys: the user has security keys, which the page offers.
	Keys bool
}

// secondStepPage asks a session waiting for its second step for a code,
// or its security key.
func (p *page) secondStepPage() {
	v := secondStepView{Next: p.r.URL.Query().Get("next"), Keys: p.hasKeys()}
	p.write(http.StatusOK, "secondfactor", view{Title: "Second step", Data: v})
}

// hasKeys reports a caller with security keys.
func (p *page) hasKeys() bool {
	var me api.Caller
	var st api.SecondFactors
	_, err := p.api.call("whoami", nil, nil, nil, &me)
	if err == nil {
		_, err = p.api.call("second-factors", map[string]string{"user": me.User}, nil, nil, &st)
	}
	return err == nil && len(st.SecurityKeys) > 0
}

// secondStep takes the code (TOTP or recovery), or the security key's
// answer the page's script put in the form, through the API.
func (p *page) secondStep() {
	f := p.form()
	v := secondStepView{Next: f.Get("next")}
	op, body := "verify-second-factor", any(api.CodeRequest{Code: f.Get("code")})
	if f.Has("credential") {
		op, body = "verify-security-key", api.SecurityKeyAnswer{Credential: answer(f.Get("credential"))}
	}
	if h, err := p.api.call(op, nil, nil, body, nil); err != nil {
		p.retryAfter(h)
		v.Error, v.Keys = err.Error(), p.hasKeys()
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
