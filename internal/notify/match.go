package notify

import (
	"path"
	"slices"
	"sort"
)

// Route returns the names of the targets ev goes to, sorted. An enabled
// target that an enabled matcher names gets the events one of those
// matchers matches; an enabled target no enabled matcher names gets every
// event but successes (failures only, the default). Test events are never
// routed: SendTest sends them to one target directly.
func (c *Config) Route(ev Event) []string {
	if ev.Type == TypeTest {
		return nil
	}
	named := map[string]bool{}
	chosen := map[string]bool{}
	for _, m := range c.Matchers {
		if m.Disable {
			continue
		}
		hit := m.Matches(ev)
		for _, t := range m.Targets {
			named[t] = true
			if hit {
				chosen[t] = true
			}
		}
	}
	var out []string
	for _, t := range c.Targets {
		if t.Disable {
			continue
		}
		if chosen[t.Name] || (!named[t.Name] && DefaultMatch(ev)) {
			out = append(out, t.Name)
		}
	}
	sort.Strings(out)
	return out
}

// DefaultMatch is what a target no matcher names receives: everything
// but successes (and tests).
func DefaultMatch(ev Event) bool {
	return ev.Type != TypeTaskSucceeded && ev.Type != TypeTest
}

// Matches reports whether the matcher selects ev (Disable is Route's
// business, not this).
func (m Matcher) Matches(ev Event) bool {
	var conds []bool
	if len(m.Types) > 0 {
		conds = append(conds, slices.Contains(m.Types, ev.Type))
	}
	if len(m.Severities) > 0 {
		conds = append(conds, slices.Contains(m.Severities, ev.Severity))
	}
	for k, g := range m.Labels {
		v, ok := ev.Labels[k]
		hit, _ := path.Match(g, v)
		conds = append(conds, ok && hit)
	}
	result := true
	if len(conds) > 0 {
		anyOf := m.Mode == "any"
		result = !anyOf
		for _, c := range conds {
			if c == anyOf { // one true decides "any", one false decides "all"
				result = anyOf
				break
			}
		}
	}
	return result != m.Invert
}
