package console

import (
	"fmt"
	"sort"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
)

// Notifications: the targets and matchers in effect (configuration
// objects of the file and of the API), and a test message to a target.

type notificationsView struct {
	Targets  []targetRow
	Matchers []matcherRow
	Problems []string
	// The forms, empty for a new object or filled with the one being
	// changed (?edit-target=NAME, ?edit-matcher=NAME).
	TargetForm  targetForm
	MatcherForm matcherForm
}

// targetForm is what the target form shows.
type targetForm struct {
	Editing                                             string // the target changed; "": a new one
	Version                                             int64
	Name, Kind, Comment, Host, Port, TLS, From, To, URL string
}

// matcherForm is what the matcher form shows.
type matcherForm struct {
	Editing, Name, Targets, Types string
	Version                       int64
}

type targetRow struct {
	Name, Kind, Destination, Source, Comment string
	Disabled                                 bool
	Warnings                                 []string
}

type matcherRow struct {
	Name, Targets, Types, Labels, Source string
}

func (p *page) notifications() {
	var v notificationsView
	var targets, matchers []api.ConfigObject
	if _, err := p.api.call("list-notification-targets", nil, nil, nil, &targets); err != nil {
		if !p.partial(err, &v.Problems, "targets") {
			return
		}
	}
	if _, err := p.api.call("list-notification-matchers", nil, nil, nil, &matchers); err != nil {
		if !p.partial(err, &v.Problems, "matchers") {
			return
		}
	}
	for _, o := range targets {
		row := targetRow{Name: o.Name, Source: o.Source, Comment: str(o.Spec["comment"]), Warnings: o.Warnings}
		row.Disabled, _ = o.Spec["disable"].(bool)
		if m, ok := o.Spec["smtp"].(map[string]any); ok {
			row.Kind = "mail"
			row.Destination = fmt.Sprintf("%s via %s", list(m["to"]), str(m["host"]))
			if port := str(m["port"]); port != "" {
				row.Destination += ":" + port
			}
		} else if m, ok := o.Spec["webhook"].(map[string]any); ok {
			row.Kind, row.Destination = "webhook", str(m["url"])
		}
		v.Targets = append(v.Targets, row)
		if o.Source == "catalog" && o.Name == p.r.URL.Query().Get("edit-target") {
			v.TargetForm = editTargetForm(o)
		}
	}
	for _, o := range matchers {
		row := matcherRow{Name: o.Name, Source: o.Source, Targets: list(o.Spec["targets"]), Types: list(o.Spec["types"])}
		if labels, ok := o.Spec["labels"].(map[string]any); ok {
			var ls []string
			for k, val := range labels {
				ls = append(ls, k+"="+str(val))
			}
			sort.Strings(ls)
			row.Labels = strings.Join(ls, ", ")
		}
		v.Matchers = append(v.Matchers, row)
		if o.Source == "catalog" && o.Name == p.r.URL.Query().Get("edit-matcher") {
			v.MatcherForm = matcherForm{Editing: o.Name, Name: o.Name, Version: o.Version, Targets: row.Targets, Types: row.Types}
		}
	}
	p.show("notifications", "Notifications", "notifications", v)
}

// editTargetForm fills the target form with a stored target.
func editTargetForm(o api.ConfigObject) targetForm {
	f := targetForm{Editing: o.Name, Name: o.Name, Version: o.Version, Comment: str(o.Spec["comment"]), Kind: "smtp", TLS: "starttls"}
	if m, ok := o.Spec["webhook"].(map[string]any); ok {
		f.Kind, f.URL = "webhook", str(m["url"])
	}
	if m, ok := o.Spec["smtp"].(map[string]any); ok {
		f.Host, f.Port, f.From, f.To = str(m["host"]), str(m["port"]), str(m["from"]), list(m["to"])
		if tls := str(m["tls"]); tls != "" {
			f.TLS = tls
		}
	}
	return f
}

// testTarget sends the target a test message (test-notification-target)
// and says whether it was accepted.
func (p *page) testTarget() {
	name := p.r.PathValue("name")
	var t api.NotificationTest
	if _, err := p.api.call("test-notification-target", map[string]string{"name": name}, nil, nil, &t); err != nil {
		p.fail(err)
		return
	}
	p.done(fmt.Sprintf("%s accepted the test message (%s).", t.Target, t.Kind), "/ui/notifications")
}
