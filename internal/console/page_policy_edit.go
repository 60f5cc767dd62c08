package console

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/console/specform"
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

// The form's fields from and to a spec (package specform).
var (
	keepRules                               = specform.KeepRules
	str, names, list, split, merged, specOf = specform.Str, specform.Names, specform.List, specform.Split, specform.Merged, specform.Policy
)

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
