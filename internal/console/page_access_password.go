package console

import (
	"net/http"

	"github.com/coffer-backup/coffer/internal/api"
)

// Passwords on the Access page: a new one-time setup link for a user
// (issue-setup-link), and the caller's own password changed with the old
// one (change-password).

// setupLink gives a user a new one-time link to choose a password.
func (p *page) setupLink() {
	var link api.SetupLink
	if _, err := p.api.call("issue-setup-link", map[string]string{"user": p.r.PathValue("user")}, nil, nil, &link); err != nil {
		p.fail(err)
		return
	}
	p.fragment("access/setuplink", link)
}

// changePassword changes the caller's own password, given the old one;
// the new one is typed twice.
func (p *page) changePassword() {
	f := p.form()
	if f.Get("new") != f.Get("again") {
		p.fail(&apiError{Status: http.StatusBadRequest, Class: api.Invalid, Detail: "the new password and its repetition differ: type it twice the same"})
		return
	}
	var me api.Caller
	if _, err := p.api.call("whoami", nil, nil, nil, &me); err != nil {
		p.fail(err)
		return
	}
	req := api.PasswordRequest{Old: f.Get("old"), New: f.Get("new")}
	if _, err := p.api.call("change-password", map[string]string{"user": me.User}, nil, req, nil); err != nil {
		if ae, ok := err.(*apiError); ok && ae.Denied() {
			// A wrong old password is refused as a denial; no
			// privilege would help, so the page does not suggest one.
			err = &apiError{Status: ae.Status, Class: api.Invalid, Detail: ae.Detail}
		}
		p.fail(err)
		return
	}
	p.done("Your password is changed.", "/ui/access")
}
