package notify

import (
	"fmt"
	"slices"
	"strings"
)

// The edits below are what the API's create, update and delete of targets
// and matchers do: each returns the configuration it would make, checked
// whole by Validate, and leaves c as it was, so a refused edit changes
// nothing.

// PutTarget adds t, or replaces the target of the same name.
func (c *Config) PutTarget(t Target) (*Config, error) {
	n := c.clone()
	if i := slices.IndexFunc(n.Targets, func(x Target) bool { return x.Name == t.Name }); i >= 0 {
		n.Targets[i] = t
	} else {
		n.Targets = append(n.Targets, t)
	}
	return n, n.Validate()
}

// DeleteTarget removes a target; one a matcher still names is refused,
// with the matchers to change first.
func (c *Config) DeleteTarget(name string) (*Config, error) {
	n := c.clone()
	i := slices.IndexFunc(n.Targets, func(x Target) bool { return x.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("no notification target is named %q", name)
	}
	var users []string
	for _, m := range n.Matchers {
		if slices.Contains(m.Targets, name) {
			users = append(users, m.Name)
		}
	}
	if len(users) > 0 {
		return nil, fmt.Errorf("target %s is used by matcher(s) %s: remove it from them first", name, strings.Join(users, ", "))
	}
	n.Targets = slices.Delete(n.Targets, i, i+1)
	return n, n.Validate()
}

// PutMatcher adds m, or replaces the matcher of the same name.
func (c *Config) PutMatcher(m Matcher) (*Config, error) {
	n := c.clone()
	if i := slices.IndexFunc(n.Matchers, func(x Matcher) bool { return x.Name == m.Name }); i >= 0 {
		n.Matchers[i] = m
	} else {
		n.Matchers = append(n.Matchers, m)
	}
	return n, n.Validate()
}

// DeleteMatcher removes a matcher.
func (c *Config) DeleteMatcher(name string) (*Config, error) {
	n := c.clone()
	i := slices.IndexFunc(n.Matchers, func(x Matcher) bool { return x.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("no notification matcher is named %q", name)
	}
	n.Matchers = slices.Delete(n.Matchers, i, i+1)
	return n, n.Validate()
}

// clone copies the lists an edit changes (targets and matchers are
// replaced whole, never changed in place).
func (c *Config) clone() *Config {
	return &Config{Targets: slices.Clone(c.Targets), Matchers: slices.Clone(c.Matchers), Delivery: c.Delivery}
}
