package policy

import (
	"fmt"
	"slices"
	"strings"
)

// The edits below are what the API's create, update and delete of
// connections, repositories, policies (and media libraries, media.go) do (as notify's edits do for
// targets and matchers): each returns the configuration it would make,
// checked whole by Validate, and leaves c as it was, so a refused edit
// changes nothing. Deleting what a policy uses is refused with an
// *InUseError naming the policies.

// InUseError refuses to delete a connection or repository that policies
// still use.
type InUseError struct {
	What     string // "connection", "repository"
	Name     string
	Policies []string // sorted
}

func (e *InUseError) Error() string {
	if len(e.Policies) == 1 {
		return fmt.Sprintf("%s %s is used by policy %s: change the policy to use another %s, or delete it, first",
			e.What, e.Name, e.Policies[0], e.What)
	}
	return fmt.Sprintf("%s %s is used by policies %s: change them to use another %s, or delete them, first",
		e.What, e.Name, strings.Join(e.Policies, ", "), e.What)
}

// PutConnection adds x, or replaces the connection of the same name.
func (c *Config) PutConnection(x Connection) (*Config, error) {
	n := c.clone()
	n.Connections = put(n.Connections, x, func(y Connection) string { return y.Name })
	return n, n.Validate()
}

// DeleteConnection removes a connection no policy uses.
func (c *Config) DeleteConnection(name string) (*Config, error) {
	n := c.clone()
	i := slices.IndexFunc(n.Connections, func(x Connection) bool { return x.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("no connection is named %q", name)
	}
	if users := c.policiesUsing(func(p Policy) bool { return slices.Contains(p.ConnectionNames(), name) }); len(users) > 0 {
		return nil, &InUseError{What: "connection", Name: name, Policies: users}
	}
	n.Connections = slices.Delete(n.Connections, i, i+1)
	return n, n.Validate()
}

// PutRepository adds r, or replaces the repository of the same name.
func (c *Config) PutRepository(r Repository) (*Config, error) {
	n := c.clone()
	n.Repositories = put(n.Repositories, r, func(y Repository) string { return y.Name })
	return n, n.Validate()
}

// DeleteRepository removes a repository no policy writes to. Its backup
// points stay where they are: only the configuration's name goes.
func (c *Config) DeleteRepository(name string) (*Config, error) {
	n := c.clone()
	i := slices.IndexFunc(n.Repositories, func(x Repository) bool { return x.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("no repository is named %q", name)
	}
	if users := c.policiesUsing(func(p Policy) bool { return p.Repository == name }); len(users) > 0 {
		return nil, &InUseError{What: "repository", Name: name, Policies: users}
	}
	n.Repositories = slices.Delete(n.Repositories, i, i+1)
	return n, n.Validate()
}

// PutPolicy adds p, or replaces the policy of the same name.
func (c *Config) PutPolicy(p Policy) (*Config, error) {
	n := c.clone()
	n.Policies = put(n.Policies, p, func(y Policy) string { return y.Name })
	return n, n.Validate()
}

// DeletePolicy removes a policy. Its jobs and backup points stay.
func (c *Config) DeletePolicy(name string) (*Config, error) {
	n := c.clone()
	i := slices.IndexFunc(n.Policies, func(x Policy) bool { return x.Name == name })
	if i < 0 {
		return nil, fmt.Errorf("no policy is named %q", name)
	}
	n.Policies = slices.Delete(n.Policies, i, i+1)
	return n, n.Validate()
}

func (c *Config) policiesUsing(uses func(Policy) bool) []string {
	var out []string
	for _, p := range c.Policies {
		if uses(p) {
			out = append(out, p.Name)
		}
	}
	return sorted(out)
}

// put replaces the entry of x's name, or appends x.
func put[T any](list []T, x T, name func(T) string) []T {
	if i := slices.IndexFunc(list, func(y T) bool { return name(y) == name(x) }); i >= 0 {
		list[i] = x
		return list
	}
	return append(list, x)
}

// clone copies the lists an edit changes (entries are replaced whole,
// never changed in place).
func (c *Config) clone() *Config {
	n := *c
	n.Connections = slices.Clone(c.Connections)
	n.Repositories = slices.Clone(c.Repositories)
	n.ResourceGroups = slices.Clone(c.ResourceGroups)
	n.Policies = slices.Clone(c.Policies)
	n.MediaLibraries = slices.Clone(c.MediaLibraries)
	n.Replications = slices.Clone(c.Replications)
	n.FailoverPlans = slices.Clone(c.FailoverPlans)
	return &n
}
