package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
)

// Notification targets and matchers made, changed and removed in the
// console (create-, update- and delete-notification-target and -matcher):
// the forms gather a spec as `coffer config create` reads it, and the API
// checks it (a target without a recipient, a matcher naming no target
// are refused with its message). A change starts from the stored spec,
// so what the form does not show (a target's credentials, a matcher's
// labels) is kept, and is made at the version the form was read at: a
// change made meanwhile by someone else is refused, not overwritten.
// Objects of the configuration file are shown, not changed: the API does
// not change the file.

// saveTarget makes a mail or webhook target, or changes the one the form
// edits.
func (p *page) saveTarget() {
	f := p.form()
	spec, ok := p.editedSpec(f, "get-notification-target")
	if !ok {
		return
	}
	delete(spec, "comment")
	if c := strings.TrimSpace(f.Get("comment")); c != "" {
		spec["comment"] = c
	}
	switch f.Get("kind") {
	case "webhook":
		delete(spec, "smtp")
		spec["webhook"] = merged(spec["webhook"], map[string]any{"url": strings.TrimSpace(f.Get("url"))})
	default:
		delete(spec, "webhook")
		smtp := map[string]any{"host": strings.TrimSpace(f.Get("host")), "tls": f.Get("tls"),
			"from": strings.TrimSpace(f.Get("from")), "to": split(f.Get("to")), "port": nil}
		if port, err := strconv.Atoi(strings.TrimSpace(f.Get("port"))); err == nil {
			smtp["port"] = port
		}
		spec["smtp"] = merged(spec["smtp"], smtp)
	}
	if !p.saveObject(f, "notification-target", spec) {
		return
	}
	if f.Get("editing") != "" {
		p.done(fmt.Sprintf("The target %s is changed.", spec["name"]), "/ui/notifications#targets-h")
		return
	}
	p.done(fmt.Sprintf("The target %s is added: send it a test from the list (shown again when the page is).", spec["name"]), "/ui/notifications#targets-h")
}

// saveMatcher routes events (all, or the types named) to targets, as a
// new matcher or the one the form edits.
func (p *page) saveMatcher() {
	f := p.form()
	spec, ok := p.editedSpec(f, "get-notification-matcher")
	if !ok {
		return
	}
	spec["targets"] = split(f.Get("targets"))
	delete(spec, "types")
	if types := split(f.Get("types")); len(types) > 0 {
		spec["types"] = types
	}
	if !p.saveObject(f, "notification-matcher", spec) {
		return
	}
	verb := "added"
	if f.Get("editing") != "" {
		verb = "changed"
	}
	p.done(fmt.Sprintf("The matcher %s is %s.", spec["name"], verb), "/ui/notifications#matchers-h")
}

// editedSpec is what a save starts from: the stored spec of the object
// the form edits (field editing), or a new spec named by the form.
func (p *page) editedSpec(f url.Values, get string) (map[string]any, bool) {
	name := strings.TrimSpace(f.Get("editing"))
	if name == "" {
		return map[string]any{"name": strings.TrimSpace(f.Get("name"))}, true
	}
	var o api.ConfigObject
	if _, err := p.api.call(get, map[string]string{"name": name}, nil, nil, &o); err != nil {
		p.fail(err)
		return nil, false
	}
	spec := o.Spec
	if spec == nil {
		spec = map[string]any{}
	}
	spec["name"] = name
	return spec, true
}

// saveObject creates the object, or updates the one the form edits at
// the version the form was read at.
func (p *page) saveObject(f url.Values, kind string, spec map[string]any) bool {
	name := f.Get("editing")
	var err error
	if name == "" {
		_, err = p.api.call("create-"+kind, nil, nil, spec, nil)
	} else {
		h := http.Header{}
		if ver := f.Get("version"); ver != "" && ver != "0" {
			h.Set("If-Match", strconv.Quote(ver))
		}
		_, err = p.api.callWith("update-"+kind, map[string]string{"name": name}, nil, h, spec, nil)
	}
	if err != nil {
		p.fail(err)
		return false
	}
	return true
}

func (p *page) deleteTarget() {
	p.deleteObject("delete-notification-target", "target", "#targets-h")
}

func (p *page) deleteMatcher() {
	p.deleteObject("delete-notification-matcher", "matcher", "#matchers-h")
}

// deleteObject deletes a target or matcher of the API.
func (p *page) deleteObject(op, what, anchor string) {
	name := p.r.PathValue("name")
	if _, err := p.api.call(op, map[string]string{"name": name}, nil, nil, nil); err != nil {
		p.fail(err)
		return
	}
	p.done(fmt.Sprintf("The %s %s is deleted.", what, name), "/ui/notifications"+anchor)
}
