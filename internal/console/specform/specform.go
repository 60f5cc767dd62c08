// Package specform turns a configuration object's spec (the API's
// document, in the configuration file's schema) into the fields of the
// console's forms and back: what the policy and notification editors
// show, and what they send.
package specform

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// KeepRules are the retention fields the policy form shows.
var KeepRules = []string{"keep-last", "keep-daily", "keep-weekly", "keep-monthly"}

// Split reads a comma-separated form field as a list.
func Split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Merged lays the form's fields over a stored section (smtp, webhook),
// keeping what the form does not show; a nil field is removed.
func Merged(stored any, form map[string]any) map[string]any {
	out := map[string]any{}
	if m, ok := stored.(map[string]any); ok {
		for k, v := range m {
			out[k] = v
		}
	}
	for k, v := range form {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	return out
}

// List writes a list of the spec ("a, b").
func List(v any) string {
	items, _ := v.([]any)
	var out []string
	for _, it := range items {
		out = append(out, Str(it))
	}
	return strings.Join(out, ", ")
}

// Str is a spec value as a form shows it.
func Str(v any) string {
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

// Names are the names of a policy's selection, as the form shows them.
func Names(sel any) string {
	m, _ := sel.(map[string]any)
	list, _ := m["names"].([]any)
	var out []string
	for _, n := range list {
		out = append(out, Str(n))
	}
	return strings.Join(out, " ")
}

// Policy is the policy the form describes, over base (the stored policy
// when editing: what the form does not show is kept).
func Policy(base map[string]any, v url.Values) map[string]any {
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
	for _, k := range KeepRules {
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
