package console

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/coffer-backup/coffer/internal/api"
)

// The engine's settings as configuration objects: limits, latency-control
// entries, resource groups, storage snapshot providers, and the
// maintenance schedules and windows, each listed
// with its source (the configuration file's, shown; the API's, changed
// and deleted here). An object is written as `coffer config create`
// reads it, YAML in the keys of its section of the configuration file,
// and the API checks it as it checks the file. A change is made at the
// version the form was read at. Every server on the catalog takes it
// within seconds.

// settingKind is one kind of the page: its kind, collection and what a
// new one starts from.
type settingKind struct {
	Kind, Plural, Title, Help, Example string
}

var settingKinds = []settingKind{
	{"limits", "limits", "Limits", "One object, merged with the configuration file's limits key by key: a key the file sets is the file's.",
		"tasks: 16\nper-host: 4\nrate: 400MiB/s\n"},
	{"latency-control", "latency-controls", "Latency control",
		"Slows backups reading from a datastore while its latency is above the threshold. The first entry naming a datastore applies: the file's come first.",
		"name: vms\ndatastores: [/srv/vms]\nthreshold: 30ms\n"},
	{"resource-group", "resource-groups", "Resource groups", "Datastores and hosts that share a limit of VM tasks (one storage controller).",
		"name: array-a\ndatastores: [ssd-*]\nlimit: 4\n"},
	{"storage-snapshot-provider", "storage-snapshot-providers", "Storage snapshot providers",
		"The storage snapshots that policies with group: datastore read their VMs from.",
		"name: xfs-a\nkind: reflink\nconnections: [lab]\ndatastores: [/srv/vms]\n"},
	{"maintenance-schedule", "maintenance-schedules", "Maintenance schedules",
		"A repository's upkeep (gc, verify, forget, copies, media copies), named by its repository. The scheduler takes a change within seconds.",
		"repository: main\ngc: {schedule: \"0 2 * * *\"}\ncopy: [{to: offsite, after: nightly}]\n"},
	{"maintenance-window", "maintenance-windows", "Maintenance windows", "When a repository's scheduled upkeep may run.",
		"name: night\nstart: \"22:00\"\nend: \"06:00\"\n"},
}

// settingOps are the operation IDs of one verb on every kind of the page.
func settingOps(verb string) []string {
	var out []string
	for _, k := range settingKinds {
		if verb == "list" {
			out = append(out, "list-"+k.Plural)
		} else {
			out = append(out, verb+"-"+k.Kind)
		}
	}
	return out
}

type settingsView struct {
	Sections []settingSection
	Problems []string
}

type settingSection struct {
	settingKind
	Objects []settingRow
	// Form is empty for a new object, or the one being changed
	// (?edit=KIND/NAME).
	Form settingForm
	// Stored: the kind's one object exists (no form adds another).
	Stored bool
}

type settingRow struct {
	Name, Source, Spec string
	Version            int64
	Notes              []string
}

type settingForm struct {
	Editing, Spec string
	Version       int64
}

// settings lists the objects of each kind, with a form to add one or to
// change the one ?edit names.
func (p *page) settings() {
	var v settingsView
	edit := p.r.URL.Query().Get("edit")
	for _, k := range settingKinds {
		sec := settingSection{settingKind: k, Form: settingForm{Spec: k.Example}}
		var objs []api.ConfigObject
		if _, err := p.api.call("list-"+k.Plural, nil, nil, nil, &objs); err != nil {
			if !p.partial(err, &v.Problems, strings.ToLower(k.Title)) {
				return
			}
		}
		for _, o := range objs {
			b, _ := yaml.Marshal(o.Spec)
			row := settingRow{Name: o.Name, Source: o.Source, Spec: string(b), Version: o.Version, Notes: o.Warnings}
			if o.Overridden {
				row.Notes = append(row.Notes, "the configuration file defines it too: not in effect")
			}
			sec.Objects = append(sec.Objects, row)
			if o.Source == "catalog" && edit == k.Kind+"/"+o.Name {
				sec.Form = settingForm{Editing: o.Name, Spec: string(b), Version: o.Version}
			}
			// There is one limits object: once made, it is changed.
			sec.Stored = sec.Stored || (o.Source == "catalog" && k.Kind == "limits")
		}
		v.Sections = append(v.Sections, sec)
	}
	p.show("settings", "Settings", "settings", v)
}

// saveSetting creates an object of the kind in the path, or changes the
// one the form edits at the version it was read at.
func (p *page) saveSetting() {
	kind := p.r.PathValue("kind")
	i := slices.IndexFunc(settingKinds, func(k settingKind) bool { return k.Kind == kind })
	if i < 0 {
		p.fail(&apiError{Status: http.StatusNotFound, Class: api.NotFound, Detail: fmt.Sprintf("no kind of setting is named %q", kind)})
		return
	}
	f := p.form()
	var spec map[string]any
	if err := yaml.Unmarshal([]byte(f.Get("spec")), &spec); err != nil || spec == nil {
		p.fail(&apiError{Status: http.StatusBadRequest, Class: api.Invalid,
			Detail: fmt.Sprintf("write the %s as YAML keys, as in its section of the configuration file (%v)", kind, err)})
		return
	}
	name, verb := f.Get("editing"), "added"
	var err error
	if name == "" {
		var o api.ConfigObject
		_, err = p.api.call("create-"+kind, nil, nil, spec, &o)
		name = o.Name
	} else {
		h := http.Header{}
		if ver := f.Get("version"); ver != "" && ver != "0" {
			h.Set("If-Match", strconv.Quote(ver))
		}
		_, err = p.api.callWith("update-"+kind, map[string]string{"name": name}, nil, h, spec, nil)
		verb = "changed"
	}
	if err != nil {
		p.fail(err)
		return
	}
	p.done(fmt.Sprintf("The %s %s is %s: every server takes it within seconds.", settingKinds[i].Kind, name, verb), "/ui/settings#"+kind)
}

// deleteSetting deletes an object of the API.
func (p *page) deleteSetting() {
	kind, name := p.r.PathValue("kind"), p.r.PathValue("name")
	if !slices.ContainsFunc(settingKinds, func(k settingKind) bool { return k.Kind == kind }) {
		p.fail(&apiError{Status: http.StatusNotFound, Class: api.NotFound, Detail: fmt.Sprintf("no kind of setting is named %q", kind)})
		return
	}
	if _, err := p.api.call("delete-"+kind, map[string]string{"name": name}, nil, nil, nil); err != nil {
		p.fail(err)
		return
	}
	p.done(fmt.Sprintf("The %s %s is deleted.", kind, name), "/ui/settings#"+kind)
}
