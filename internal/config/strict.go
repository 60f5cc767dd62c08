package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

var (
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
	nodeType        = reflect.TypeFor[yaml.Node]()
)

// checkKnown reports the first mapping key under n that has no field in t,
// with its line and the closest known name, so a typo in a section (like a
// typo in a scalar key) is an error instead of a silent default. Type
// mismatches are left to yaml's Decode.
func checkKnown(n *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if t == nodeType || t.Implements(unmarshalerType) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil // decodes itself
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		fields := map[string]reflect.Type{}
		yamlFields(t, fields)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			ft, ok := fields[k]
			if !ok {
				return unknownKey(n.Content[i], path, fields)
			}
			if err := checkKnown(n.Content[i+1], ft, path+"."+k); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yaml.SequenceNode {
			return nil
		}
		for i, c := range n.Content {
			if err := checkKnown(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := checkKnown(n.Content[i+1], t.Elem(), path+"."+n.Content[i].Value); err != nil {
				return err
			}
		}
	}
	return nil
}

// unknownKey describes a key a section's schema has no field for, with the
// closest known key, or, when none is close, a hint for the two mistakes a
// suggestion cannot catch: a top-level setting written inside a section,
// and a key in a section that takes none in this version.
func unknownKey(k *yaml.Node, path string, fields map[string]reflect.Type) error {
	known := map[string]bool{}
	for f := range fields {
		known[f] = true
	}
	hint := suggest(k.Value, known, nil)
	if hint == "" && !strings.ContainsAny(path, ".[") {
		if _, top := Lookup(k.Value); top || slices.Contains(Sections, k.Value) {
			hint = fmt.Sprintf(" (%s is a top-level key: write it at the start of a line, outside %s)", k.Value, path)
		} else if len(fields) == 0 {
			hint = fmt.Sprintf(" (%s takes no keys in this version)", path)
		}
	}
	return fmt.Errorf("line %d: unknown key %q in %s%s", k.Line, k.Value, path, hint)
}

// yamlFields maps the YAML names of t's exported fields to their types,
// following yaml.v3's rules (lower-cased field name by default, ",inline").
func yamlFields(t reflect.Type, out map[string]reflect.Type) {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if strings.Contains(opts, "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				yamlFields(ft, out)
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
}

// DecodeNode decodes n into v, refusing keys v has no field for.
func DecodeNode(n *yaml.Node, v any, path string) error {
	if err := checkKnown(n, reflect.TypeOf(v), path); err != nil {
		return err
	}
	return n.Decode(v)
}
