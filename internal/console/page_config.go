package console

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/coffer-backup/coffer/internal/api"
)

// The configuration objects the console edits as the configuration file
// writes them: the engine's settings (Settings), the connections
// (Connections), the repositories (Repositories) and the media libraries
// (Media). Every page lists its kinds with their sources through one
// section (the "config" template) and saves and deletes them through
// the two actions here, so a kind is added to the console by naming it
// in its page's list. An object is written as `coffer config create`
// reads it, YAML in the keys of its section of the configuration file,
// and the API checks it as it checks the file: a refusal is shown under
// the form, whose text stays as typed. A change is made at the version
// the form was read at. Every server on the catalog takes it within
// seconds.

// configKind is one kind of object a page edits: its kind, collection,
// what a new one starts from, and the page that lists it.
type configKind struct {
	Kind, Plural, Title, Help, Example string
	// Page lists the kind: a plain form's change returns there.
	Page string
}

// editableKinds are the kinds of every page, for the actions.
func editableKinds() []configKind {
	return slices.Concat(settingKinds, connectionKinds, repositoryKinds, mediaLibraryKinds)
}

// deletableKinds are the kinds the delete action takes: the editable
// ones and the policies, which their own editor makes.
func deletableKinds() []configKind { return slices.Concat(editableKinds(), policyKinds) }

// configOps are the operation IDs of one verb on kinds.
func configOps(kinds []configKind, verbs ...string) []string {
	var out []string
	for _, verb := range verbs {
		for _, k := range kinds {
			if verb == "list" {
				out = append(out, "list-"+k.Plural)
			} else {
				out = append(out, verb+"-"+k.Kind)
			}
		}
	}
	return out
}

// configSection is the objects of one kind on a page, with its form.
type configSection struct {
	configKind
	Objects []configRow
	// Form is empty for a new object, or the one being changed
	// (?edit=KIND/NAME).
	Form configForm
	// Stored: the kind's one object exists (no form adds another).
	Stored bool
}

type configRow struct {
	Name, Source, Spec string
	Version            int64
	Notes              []string
}

type configForm struct {
	Editing, Spec string
	Version       int64
}

// configSections lists the objects of kinds, with a form to add one or
// to change the one ?edit names. A list the caller may not read is a
// problem of the page; false when the page has failed whole (signed
// out).
func (p *page) configSections(kinds []configKind, problems *[]string) ([]configSection, bool) {
	var out []configSection
	edit := p.r.URL.Query().Get("edit")
	for _, k := range kinds {
		sec := configSection{configKind: k, Form: configForm{Spec: k.Example}}
		var objs []api.ConfigObject
		if _, err := p.api.call("list-"+k.Plural, nil, nil, nil, &objs); err != nil {
			if !p.partial(err, problems, k.Title) {
				return nil, false
			}
		}
		for _, o := range objs {
			b, _ := yaml.Marshal(o.Spec)
			row := configRow{Name: o.Name, Source: o.Source, Spec: string(b), Version: o.Version, Notes: o.Warnings}
			if o.Overridden {
				row.Notes = append(row.Notes, "the configuration file defines it too: not in effect")
			}
			sec.Objects = append(sec.Objects, row)
			if o.Source == "catalog" && edit == k.Kind+"/"+o.Name {
				sec.Form = configForm{Editing: o.Name, Spec: string(b), Version: o.Version}
			}
			// There is one limits object: once made, it is changed.
			sec.Stored = sec.Stored || (o.Source == "catalog" && k.Kind == "limits")
		}
		out = append(out, sec)
	}
	return out, true
}

// configPageView is a page of configuration objects alone.
type configPageView struct {
	Sections []configSection
	Problems []string
	// Effective is the configuration in effect (the Settings page's).
	Effective *api.EffectiveConfig
}

// configPage shows the page name (its template and navigation entry),
// which lists kinds.
func (p *page) configPage(kinds []configKind, name, title string) {
	var v configPageView
	var ok bool
	if v.Sections, ok = p.configSections(kinds, &v.Problems); ok {
		p.show(name, title, name, v)
	}
}

// configKindOf is the kind the action's path names, one of kinds.
func (p *page) configKindOf(kinds []configKind) (configKind, bool) {
	kind := p.r.PathValue("kind")
	i := slices.IndexFunc(kinds, func(k configKind) bool { return k.Kind == kind })
	if i < 0 {
		p.fail(&apiError{Status: http.StatusNotFound, Class: api.NotFound, Detail: fmt.Sprintf("the console edits no kind of configuration object named %q", kind)})
		return configKind{}, false
	}
	return kinds[i], true
}

// saveConfig creates an object of the kind in the path, or changes the
// one the form edits at the version it was read at.
func (p *page) saveConfig() {
	k, ok := p.configKindOf(editableKinds())
	if !ok {
		return
	}
	f := p.form()
	var spec map[string]any
	if err := yaml.Unmarshal([]byte(f.Get("spec")), &spec); err != nil || spec == nil {
		p.fail(&apiError{Status: http.StatusBadRequest, Class: api.Invalid,
			Detail: fmt.Sprintf("write the %s as YAML keys, as in its section of the configuration file (%v)", k.Kind, err)})
		return
	}
	name, verb := f.Get("editing"), "added"
	var err error
	if name == "" {
		var o api.ConfigObject
		_, err = p.api.call("create-"+k.Kind, nil, nil, spec, &o)
		name = o.Name
	} else {
		h := http.Header{}
		if ver := f.Get("version"); ver != "" && ver != "0" {
			h.Set("If-Match", strconv.Quote(ver))
		}
		_, err = p.api.callWith("update-"+k.Kind, map[string]string{"name": name}, nil, h, spec, nil)
		verb = "changed"
	}
	if err != nil {
		p.fail(err)
		return
	}
	p.done(fmt.Sprintf("The %s %s is %s: every server takes it within seconds.", k.Kind, name, verb), k.Page+"#"+k.Kind)
}

// deleteConfig deletes an object of the API.
func (p *page) deleteConfig() {
	k, ok := p.configKindOf(deletableKinds())
	if !ok {
		return
	}
	name := p.r.PathValue("name")
	if _, err := p.api.call("delete-"+k.Kind, map[string]string{"name": name}, nil, nil, nil); err != nil {
		p.fail(err)
		return
	}
	if slices.Contains(policyKinds, k) {
		// The object's own page is gone: back to the list.
		p.redirect(k.Page)
		return
	}
	p.done(fmt.Sprintf("The %s %s is deleted.", k.Kind, name), k.Page+"#"+k.Kind)
}
