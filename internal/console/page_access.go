package console

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
)

// Access: users, API tokens, ACL entries and the audit log.

type accessView struct {
	Users    []api.User
	Tokens   []api.Token
	ACL      []api.ACLEntry
	Roles    []string
	Problems []string
}

var roleNames = []string{"Admin", "Auditor", "BackupOperator", "RestoreOperator", "RepositoryAdmin", "PolicyEditor", "NoAccess"}

func (p *page) access() {
	v := accessView{Roles: roleNames}
	for _, c := range []struct {
		op  string
		out any
	}{{"list-users", &v.Users}, {"list-tokens", &v.Tokens}, {"list-acl", &v.ACL}} {
		if _, err := p.api.call(c.op, nil, nil, nil, c.out); err != nil {
			if !p.partial(err, &v.Problems, c.op) {
				return
			}
		}
	}
	p.show("access", "Access", "access", v)
}

// createToken makes an API token of the caller's with one grant
// (create-token); its secret is shown this once.
func (p *page) createToken() {
	f := p.form()
	days, err := strconv.Atoi(f.Get("days"))
	if err != nil || days < 1 {
		p.fail(&apiError{Status: http.StatusBadRequest, Class: api.Invalid, Detail: "the token's lifetime: a number of days, 1 or more"})
		return
	}
	req := api.TokenRequest{Comment: f.Get("comment"), LifetimeSeconds: (time.Duration(days) * 24 * time.Hour).Seconds()}
	if path := f.Get("path"); path != "" {
		req.Grants = []api.Grant{{Path: path, Role: f.Get("role"), Propagate: f.Get("propagate") == "1"}}
	}
	var nt api.NewToken
	if _, err := p.api.call("create-token", nil, nil, req, &nt); err != nil {
		p.fail(err)
		return
	}
	p.fragment("access/newtoken", nt)
}

func (p *page) revokeToken() {
	id := p.r.PathValue("token")
	if _, err := p.api.call("revoke-token", map[string]string{"token": id}, nil, nil, nil); err != nil {
		p.fail(err)
		return
	}
	p.done("Token "+id+" is revoked.", "/ui/access")
}

// createUser makes an account with a one-time setup link (create-user).
func (p *page) createUser() {
	name := p.form().Get("name")
	var link api.SetupLink
	if _, err := p.api.call("create-user", nil, nil, api.CreateUserRequest{Name: name}, &link); err != nil {
		p.fail(err)
		return
	}
	p.fragment("access/newuser", link)
}

// grant sets an ACL entry (set-acl).
func (p *page) grant() {
	f := p.form()
	e := api.ACLEntry{Path: f.Get("path"), User: f.Get("user"), Role: f.Get("role"), Propagate: f.Get("propagate") == "1"}
	if _, err := p.api.call("set-acl", nil, nil, e, nil); err != nil {
		p.fail(err)
		return
	}
	p.done(e.User+" holds "+e.Role+" on "+e.Path+".", "/ui/access")
}

func (p *page) disableUser() {
	p.userAction("disable-user", "is disabled: their sessions are ended and their tokens stopped")
}
func (p *page) enableUser() { p.userAction("enable-user", "may sign in again") }
func (p *page) deleteUser() {
	p.userAction("delete-user", "is deleted, with their tokens, sessions and grants")
}

// userAction runs op (disable-user, enable-user, delete-user) on the
// user the path names.
func (p *page) userAction(op, did string) {
	user := p.r.PathValue("user")
	if _, err := p.api.call(op, map[string]string{"user": user}, nil, nil, nil); err != nil {
		p.fail(err)
		return
	}
	p.done("User "+user+" "+did+".", "/ui/access")
}

// revokeGrant removes an ACL entry (remove-acl), named by the row's
// hidden fields.
func (p *page) revokeGrant() {
	f := p.form()
	e := api.ACLEntry{Path: f.Get("path"), User: f.Get("user"), TokenID: f.Get("token"), Role: f.Get("role"), Propagate: f.Get("propagate") == "1"}
	if _, err := p.api.call("remove-acl", nil, nil, e, nil); err != nil {
		p.fail(err)
		return
	}
	p.done(e.User+" no longer holds "+e.Role+" on "+e.Path+".", "/ui/access")
}

type auditView struct {
	Records []api.AuditRecord
	Filter  struct{ User, Operation, Result string }
	Next    string
}

func (p *page) audit() {
	q := p.r.URL.Query()
	v := auditView{}
	v.Filter.User, v.Filter.Operation, v.Filter.Result = q.Get("user"), q.Get("operation"), q.Get("result")
	aq := url.Values{"limit": {strconv.Itoa(pageSize + 1)}}
	for k, val := range map[string]string{"user": v.Filter.User, "operation": v.Filter.Operation, "result": v.Filter.Result} {
		if val != "" {
			aq.Set(k, val)
		}
	}
	if b := p.intParam("before"); b > 0 {
		aq.Set("before_id", strconv.FormatInt(b, 10))
	}
	if _, err := p.api.call("query-audit", nil, aq, nil, &v.Records); err != nil {
		p.fail(err)
		return
	}
	if len(v.Records) > pageSize {
		v.Records = v.Records[:pageSize]
		next := p.r.URL.Query()
		next.Set("before", strconv.FormatInt(v.Records[pageSize-1].ID, 10))
		v.Next = "/ui/access/audit?" + next.Encode()
	}
	p.show("audit", "Audit log", "access", v)
}
