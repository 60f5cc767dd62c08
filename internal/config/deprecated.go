package config

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// Deprecation is a key of the configuration file that a later release
// removes: it still works until then. Key is its dotted path through the
// file's mappings ("maintenance.takeover-after"); a list's items are
// looked into as if the list were not there ("policies.schedule" is the
// key of any policy).
type Deprecation struct {
	Key, Since, Instead string
}

// Deprecated lists the deprecated keys. docs/compatibility.md: a key is
// listed here for at least one release before it goes. None is yet.
var Deprecated []Deprecation

// DeprecatedIn returns the deprecated keys the YAML document doc uses
// (of list, normally Deprecated), in list's order.
func DeprecatedIn(doc []byte, list []Deprecation) ([]Deprecation, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(doc, &root); err != nil {
		return nil, err
	}
	used := map[string]bool{}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				key := strings.TrimPrefix(path+"."+n.Content[i].Value, ".")
				used[key] = true
				walk(n.Content[i+1], key)
			}
		}
	}
	walk(&root, "")
	var out []Deprecation
	for _, d := range list {
		if used[d.Key] {
			out = append(out, d)
		}
	}
	return out, nil
}
