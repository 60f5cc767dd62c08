package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
)

// The policy editor: a form over the settings most policies set, checked
// as it is typed (preview-policy-draft: the same checks as a save, the
// VMs it would select and its next runs), saved through the policy's
// configuration-object operations with the version it was read at
// (If-Match), so that two operators editing at once cannot overwrite
// each other. Settings the form does not show (timeouts, retries, tags,
// ...) are kept as the stored policy has them.

type policyForm struct {
	Editing    string // the policy's name when editing, "" for a new one
	Version    int64
	FromFile   bool // the configuration file defines it: edit it there
	Name       string
	Connection string
	Repository string
	Select     string // name globs, separated by spaces
	Exclude    string
	Mode       string
	Snapshot   string
	Schedule   string
	Keep       map[string]string // keep-last, keep-daily, ...
	RPO        string

	Connections  []string
	Repositories []string
}

// keepRules are the retention fields the form shows.
var keepRules = []string{"keep-last", "keep-daily", "keep-weekly", "keep-monthly"}

func (p *page) policyEditor() {
	f := policyForm{Keep: map[string]string{}, Repositories: p.c.cfg.Repositories(p.r.Context())}
	if name := p.r.PathValue("policy"); name != "" {
		o, ok := p.storedPolicy(name)
		if !ok {
			return
		}
		f = formOf(o)
		f.Repositories = p.c.cfg.Repositories(p.r.Context())
	}
	var conns []api.ConfigObject
	if _, err := p.api.call("list-connections", nil, nil, nil, &conns); err == nil {
		for _, c := range conns {
			f.Connections = append(f.Connections, c.Name)
		}
	}
	title := "New policy"
	if f.Editing != "" {
		title = "Edit policy " + f.Editing
	}
	p.show("policyedit", title, "policies", f)
}

// storedPolicy reads a policy as the API stores it (get-policy).
func (p *page) storedPolicy(name string) (*api.ConfigObject, bool) {
	var o api.ConfigObject
	if _, err := p.api.call("get-policy", map[string]string{"name": name}, nil, nil, &o); err != nil {
		p.fail(err)
		return nil, false
	}
	return &o, true
}

// formOf fills the form from a stored policy.
func formOf(o *api.ConfigObject) policyForm {
	s := o.Spec
	f := policyForm{Editing: o.Name, Version: o.Version, FromFile: o.Source == "file", Name: o.Name, Keep: map[string]string{},
		Connection: str(s["connection"]), Repository: str(s["repository"]), Mode: str(s["mode"]), Snapshot: str(s["snapshot"]),
		Schedule: str(s["schedule"]), RPO: str(s["rpo"])}
	if f.Connection == "" {
		if cs, ok := s["connections"].([]any); ok && len(cs) > 0 {
			f.Connection = str(cs[0])
		}
	}
	f.Select, f.Exclude = names(s["select"]), names(s["exclude"])
	if r, ok := s["retention"].(map[string]any); ok {
		for _, k := range keepRules {
			if v, ok := r[k]; ok {
				f.Keep[k] = str(v)
			}
		}
	}
	return f
}

func str(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

func names(sel any) string {
	m, _ := sel.(map[string]any)
	list, _ := m["names"].([]any)
	var out []string
	for _, n := range list {
		out = append(out, str(n))
	}
	return strings.Join(out, " ")
}

// specOf is the policy the form describes, over base (the stored policy
// when editing: what the form does not show is kept).
func specOf(base map[string]any, v url.Values) map[string]any {
	s := map[string]any{}
	for k, val := range base {
		s[k] = val
	}
	set := func(key, val string) {
		if val = strings.TrimSpace(val); val == "" {
			delete(s, key)
		} else {
			s[key] = val
		}
	}
	set("name", v.Get("name"))
	if c := strings.TrimSpace(v.Get("connection")); c != "" {
		delete(s, "connections")
	}
	for _, k := range []string{"connection", "repository", "mode", "snapshot", "schedule", "rpo"} {
		set(k, v.Get(k))
	}
	for key, field := range map[string]string{"select": "select", "exclude": "exclude"} {
		m, _ := s[key].(map[string]any)
		m = copyMap(m)
		if globs := strings.Fields(v.Get(field)); len(globs) > 0 {
			m["names"] = globs
		} else {
			delete(m, "names")
		}
		if len(m) == 0 {
			delete(s, key)
		} else {
			s[key] = m
		}
	}
	r, _ := s["retention"].(map[string]any)
	r = copyMap(r)
	for _, k := range keepRules {
		val := strings.TrimSpace(v.Get(k))
		switch n, err := strconv.Atoi(val); {
		case val == "":
			delete(r, k)
		case err == nil:
			r[k] = n
		default:
			r[k] = val // the API says what is wrong with it
		}
	}
	if len(r) == 0 {
		delete(s, "retention")
	} else {
		s["retention"] = r
	}
	return s
}

func copyMap(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// draftView is the editor's live check.
type draftView struct {
	Preview *api.PolicyPreview
	Problem string
}

// policyDraft checks the form as it is typed: the draft's problems, or
// what it would select and when it would run.
func (p *page) policyDraft() {
	v := p.form()
	base, ok := p.baseOf(v)
	if !ok {
		return
	}
	var d draftView
	var pv api.PolicyPreview
	if _, err := p.api.call("preview-policy-draft", nil, url.Values{"runs": {"3"}}, specOf(base, v), &pv); err != nil {
		var ae *apiError
		if e, ok := err.(*apiError); ok {
			ae = e
		}
		if ae != nil && ae.Status == http.StatusUnauthorized {
			p.fail(err)
			return
		}
		d.Problem = err.Error()
	} else {
		d.Preview = &pv
	}
	p.fragment("policyedit/draft", d)
}

// baseOf is the stored policy the form edits (nil for a new one).
func (p *page) baseOf(v url.Values) (map[string]any, bool) {
	name := v.Get("editing")
	if name == "" {
		return nil, true
	}
	o, ok := p.storedPolicy(name)
	if !ok {
		return nil, false
	}
	return o.Spec, true
}

// savePolicy creates the policy (create-policy) or changes it
// (update-policy) at the version the form was read at, then shows it.
func (p *page) savePolicy() {
	v := p.form()
	base, ok := p.baseOf(v)
	if !ok {
		return
	}
	spec := specOf(base, v)
	var o api.ConfigObject
	var err error
	if name := v.Get("editing"); name == "" {
		_, err = p.api.callWith("create-policy", nil, nil, http.Header{}, spec, &o)
	} else {
		h := http.Header{}
		if ver := v.Get("version"); ver != "" && ver != "0" {
			h.Set("If-Match", strconv.Quote(ver))
		}
		_, err = p.api.callWith("update-policy", map[string]string{"name": name}, nil, h, spec, &o)
	}
	if err != nil {
		p.fail(err)
		return
	}
	p.redirect("/ui/policies/" + url.PathEscape(o.Name))
}
