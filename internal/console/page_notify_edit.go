package console

import (
	"fmt"
	"strconv"
	"strings"
)

// Notification targets and matchers made and removed in the console
// (create-/delete-notification-target, create-/delete-notification-matcher):
// the forms gather a spec as `coffer config create` reads it, and the API
// checks it (a target without a recipient, a matcher naming no target
// are refused with its message). Objects of the configuration file are
// shown, not changed: the API does not change the file.

// split reads a comma-separated form field as a list.
func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// createTarget makes a mail or webhook target.
func (p *page) createTarget() {
	f := p.form()
	spec := map[string]any{"name": strings.TrimSpace(f.Get("name"))}
	if c := strings.TrimSpace(f.Get("comment")); c != "" {
		spec["comment"] = c
	}
	switch f.Get("kind") {
	case "webhook":
		spec["webhook"] = map[string]any{"url": strings.TrimSpace(f.Get("url"))}
	default:
		smtp := map[string]any{"host": strings.TrimSpace(f.Get("host")), "tls": f.Get("tls"),
			"from": strings.TrimSpace(f.Get("from")), "to": split(f.Get("to"))}
		if port, err := strconv.Atoi(strings.TrimSpace(f.Get("port"))); err == nil {
			smtp["port"] = port
		}
		spec["smtp"] = smtp
	}
	if _, err := p.api.call("create-notification-target", nil, nil, spec, nil); err != nil {
		p.fail(err)
		return
	}
	p.done(fmt.Sprintf("The target %s is added: send it a test from the list (shown again when the page is).", spec["name"]), "/ui/notifications#targets-h")
}

// createMatcher routes events (all, or the types named) to targets.
func (p *page) createMatcher() {
	f := p.form()
	spec := map[string]any{"name": strings.TrimSpace(f.Get("name")), "targets": split(f.Get("targets"))}
	if types := split(f.Get("types")); len(types) > 0 {
		spec["types"] = types
	}
	if _, err := p.api.call("create-notification-matcher", nil, nil, spec, nil); err != nil {
		p.fail(err)
		return
	}
	p.done(fmt.Sprintf("The matcher %s is added.", spec["name"]), "/ui/notifications#matchers-h")
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
