package policy

import (
	"errors"
	"strings"
	"testing"
)

// TestEdits: each edit returns the configuration it would make, checked
// whole with the file's messages, and leaves the one it was made on as it
// was; deleting what policies use names them.
func TestEdits(t *testing.T) {
	c, err := load(t, `
connections: [{name: lab, kind: fake}, {name: spare, kind: fake}]
repositories: [{name: main, location: /srv/main}, {name: old, location: /srv/old}]
policies:
  - {name: nightly, connection: lab, repository: main}
  - {name: weekly, connections: [lab], repository: main}
`)
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.PutPolicy(Policy{Name: "hourly", Connection: "spare", Schedule: "@hourly"})
	if err != nil || len(n.Policies) != 3 || len(c.Policies) != 2 {
		t.Fatalf("put a new policy: %d policies (the original %d), %v", len(n.Policies), len(c.Policies), err)
	}
	n, err = n.PutPolicy(Policy{Name: "hourly", Connection: "spare", Schedule: "@daily"})
	if p, _ := n.Policy("hourly"); err != nil || len(n.Policies) != 3 || p.Schedule != "@daily" {
		t.Fatalf("replace a policy: %+v, %v", n.Policies, err)
	}
	if _, err := c.PutPolicy(Policy{Name: "bad", Connection: "nope", Mode: "weekly"}); err == nil ||
		!strings.Contains(err.Error(), `policy bad: unknown connection "nope" (known: lab, spare)`) ||
		!strings.Contains(err.Error(), `policy bad: mode: "weekly" is not one of incremental, differential, full`) {
		t.Fatalf("an invalid policy: %v", err)
	}
	if _, err := c.PutConnection(Connection{Name: "lab"}); err == nil || !strings.Contains(err.Error(), "connection lab: kind is missing") {
		t.Fatalf("a connection without kind: %v", err)
	}

	var inUse *InUseError
	_, err = c.DeleteConnection("lab")
	if !errors.As(err, &inUse) || err.Error() != "connection lab is used by policies nightly, weekly: "+
		"change them to use another connection, or delete them, first" {
		t.Fatalf("deleting a connection in use: %v", err)
	}
	_, err = c.DeleteRepository("main")
	if !errors.As(err, &inUse) || inUse.What != "repository" || strings.Join(inUse.Policies, ",") != "nightly,weekly" {
		t.Fatalf("deleting a repository in use: %v", err)
	}
	one, err := c.DeletePolicy("weekly")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := one.DeleteConnection("lab"); err == nil || err.Error() != "connection lab is used by policy nightly: "+
		"change the policy to use another connection, or delete it, first" {
		t.Fatalf("deleting a connection one policy uses: %v", err)
	}
	for what, del := range map[string]func() (*Config, error){
		"connection": func() (*Config, error) { return c.DeleteConnection("spare") },
		"repository": func() (*Config, error) { return c.DeleteRepository("old") },
	} {
		if n, err := del(); err != nil || len(n.Connections)+len(n.Repositories) != 3 {
			t.Fatalf("deleting an unused %s: %v", what, err)
		}
	}
	for what, del := range map[string]func() (*Config, error){
		"connection": func() (*Config, error) { return c.DeleteConnection("x") },
		"repository": func() (*Config, error) { return c.DeleteRepository("x") },
		"policy":     func() (*Config, error) { return c.DeletePolicy("x") },
	} {
		if _, err := del(); err == nil || !strings.Contains(err.Error(), `no `+what+` is named "x"`) {
			t.Fatalf("deleting a missing %s: %v", what, err)
		}
	}
	if len(c.Connections) != 2 || len(c.Repositories) != 2 || len(c.Policies) != 2 {
		t.Fatalf("the edits changed the configuration they were made on: %+v", c)
	}
}
