package notify

import (
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/coffer-backup/coffer/internal/config"
)

// FuzzDecode: any document either fails with an error or decodes; a
// decoded section that validates routes every sample event without
// panicking, to targets it defines, and survives being written back as
// YAML and read again (what a configuration editor does).
func FuzzDecode(f *testing.F) {
	f.Add([]byte(goodConfig))
	f.Add([]byte("notifications:\n  targets: [{name: a, webhook: {url: 'https://x'}}]\n  matchers: [{name: m, targets: [a], mode: any, invert: true, labels: {vm: 'w*'}}]\n"))
	f.Add([]byte("notifications:\n  targets: [{name: a, smtp: {host: h, from: a@b.c, to: [c@d.e], password: x}}]\n"))
	f.Add([]byte("notifications: &a\n  targets: *a\n"))
	f.Add([]byte("notifications:\n  delivery: {backoff: 1d2h, keep: 0}\n"))
	f.Add([]byte("notifications: []\n"))
	f.Fuzz(func(t *testing.T, doc []byte) {
		file, err := config.Parse(doc)
		if err != nil {
			return
		}
		c, err := Decode(file)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty error")
			}
			return
		}
		if c.Validate() != nil {
			return
		}
		names := map[string]bool{}
		for _, tg := range c.Targets {
			names[tg.Name] = true
		}
		for _, ev := range sampleEvents() {
			for _, name := range c.Route(ev) {
				if !names[name] {
					t.Fatalf("routed to %q, which is not a target", name)
				}
			}
		}
		out, err := yaml.Marshal(map[string]*Config{Section: c})
		if err != nil {
			t.Fatalf("marshal %+v: %v", c, err)
		}
		file2, err := config.Parse(out)
		if err != nil {
			t.Fatalf("re-parse %s: %v", out, err)
		}
		c2, err := Load(file2)
		if err != nil {
			t.Fatalf("re-load %s: %v", out, err)
		}
		if !reflect.DeepEqual(normalize(c), normalize(c2)) {
			t.Fatalf("round trip changed the configuration:\n%+v\n%+v\n%s", c, c2, out)
		}
	})
}

// normalize makes empty lists and maps nil, which YAML does not tell apart.
func normalize(c *Config) *Config {
	n := *c
	if len(n.Targets) == 0 {
		n.Targets = nil
	}
	if len(n.Matchers) == 0 {
		n.Matchers = nil
	}
	n.Matchers = append([]Matcher(nil), n.Matchers...)
	for i, m := range n.Matchers {
		if len(m.Labels) == 0 {
			m.Labels = nil
		}
		if len(m.Types) == 0 {
			m.Types = nil
		}
		if len(m.Severities) == 0 {
			m.Severities = nil
		}
		n.Matchers[i] = m
	}
	return &n
}
