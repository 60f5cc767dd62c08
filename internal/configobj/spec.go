package configobj

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/maintenance"
	"github.com/coffer-backup/coffer/internal/notify"
	"github.com/coffer-backup/coffer/internal/policy"
)

// Spec is an object in the configuration file's schema: the keys of one
// entry of its section, as JSON or YAML decode them.
type Spec = map[string]any

// sections are the configuration file's sections of the engine's kinds.
var sections = map[Kind]string{Connection: "connections", Repository: "repositories", Policy: "policies",
	MediaLibrary: "media-libraries", Replication: "replications", FailoverPlan: "failover-plans"}

// decode reads a spec with the configuration file's decoder of its kind,
// as if it were the only entry of its section, so that it is as strict
// and fails with the same messages as the file (which name the entry
// "policies[0]"). It returns a policy.Connection, policy.Repository,
// policy.Policy, notify.Target, notify.Matcher or policy.MediaLibrary.
func decode(k Kind, spec []byte) (any, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(spec, &doc); err != nil {
		return nil, fail(ErrInvalid, "the %s is not a JSON or YAML object: %v", k, err)
	}
	if len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, fail(ErrInvalid, "a %s is an object of the keys of the configuration file's entries (like {\"name\": ...})", k)
	}
	entry := doc.Content[0]
	list := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Content: []*yaml.Node{entry}}
	var v any
	var err error
	switch k {
	case Connection:
		if err = refuseInline(entry, "connections[0].options", "options", "password", "secret"); err == nil {
			var out []policy.Connection
			if err = config.DecodeNode(list, &out, sections[k]); err == nil {
				v = out[0]
			}
		}
	case Repository:
		if err = refuseInline(entry, "repositories[0]", "", "password"); err == nil {
			var out []policy.Repository
			if err = config.DecodeNode(list, &out, sections[k]); err == nil {
				v = out[0]
			}
		}
	case Policy:
		var out []policy.Policy
		if err = config.DecodeNode(list, &out, sections[k]); err == nil {
			v = out[0]
		}
	case MediaLibrary:
		var out []policy.MediaLibrary
		if err = config.DecodeNode(list, &out, sections[k]); err == nil {
			v = out[0]
		}
	case Replication:
		var out []policy.Replication
		if err = config.DecodeNode(list, &out, sections[k]); err == nil {
			v = out[0]
		}
	case FailoverPlan:
		var out []policy.FailoverPlan
		if err = config.DecodeNode(list, &out, sections[k]); err == nil {
			v = out[0]
		}
	case NotificationTarget, NotificationMatcher:
		key := map[Kind]string{NotificationTarget: "targets", NotificationMatcher: "matchers"}[k]
		section := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, list}}
		var c notify.Config
		if err = notify.DecodeNode(section, &c); err == nil {
			if k == NotificationTarget {
				v = c.Targets[0]
			} else {
				v = c.Matchers[0]
			}
		}
	case MaintenanceWindow, MaintenanceSchedule:
		v, err = decodeMaintenance(k, list)
	default:
		v, err = decodeSetting(k, entry, list)
	}
	if err != nil {
		return nil, fail(ErrInvalid, "%s", dropLines(err.Error()))
	}
	return v, nil
}

// lineRef is the position yaml gives in the file's messages; in a spec
// sent to the API it points at nothing the sender wrote.
var lineRef = regexp.MustCompile(`line \d+: `)

func dropLines(s string) string { return lineRef.ReplaceAllString(s, "") }

// refuseInline refuses a secret written into a spec (under the mapping
// key under, "" for the entry itself) with where to put it instead: the
// one mistake whose "unknown key" would not say what to do. Notification
// targets have the same check in notify.DecodeNode.
func refuseInline(entry *yaml.Node, where, under string, keys ...string) error {
	n := entry
	if under != "" {
		n = mapValue(entry, under)
	}
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		for _, k := range keys {
			if n.Content[i].Value == k {
				return fmt.Errorf("%s.%s: secrets are not written in the configuration: put it alone in a file only coffer can read "+
					"(chmod 600) on every server that uses it, and name that file with %s-file", where, k, k)
			}
		}
	}
	return nil
}

func mapValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// nameOf is the name of a decoded object.
func nameOf(v any) string {
	switch x := v.(type) {
	case policy.Connection:
		return x.Name
	case policy.Repository:
		return x.Name
	case policy.Policy:
		return x.Name
	case notify.Target:
		return x.Name
	case notify.Matcher:
		return x.Name
	case policy.MediaLibrary:
		return x.Name
	case policy.Replication:
		return x.Name
	case policy.FailoverPlan:
		return x.Name
	case maintenance.Window:
		return x.Name
	case maintenance.Repository:
		return x.Repository
	}
	return settingName(v)
}

// encode writes a decoded object back as a spec, leaving out what is
// zero (the defaults), so that an object of the file reads like the
// entry it came from.
func encode(v any) (Spec, error) {
	b, err := yaml.Marshal(v)
	if err != nil {
		return nil, err
	}
	var s Spec
	if err := yaml.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	prune(s)
	if s == nil {
		s = Spec{}
	}
	return s, nil
}

// prune removes zero values from a decoded document: nulls, "", 0,
// false, empty lists and maps, and "0s", the zero duration.
func prune(m map[string]any) {
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			prune(sub)
		}
		if zero(v) {
			delete(m, k)
		}
	}
}

func zero(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == "" || x == "0s"
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return reflect.ValueOf(v).IsZero()
}

// specJSON is the stored form of a spec. A spec whose keys are not all
// strings (YAML allows it) is refused here.
func specJSON(k Kind, s Spec) ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fail(ErrInvalid, "the %s cannot be written as JSON (are all its keys strings?): %v", k, err)
	}
	return b, nil
}

// ParseSpec reads a stored spec.
func ParseSpec(b []byte) (Spec, error) {
	var s Spec
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	return s, nil
}

// changedKeys names the top-level keys whose values differ (for the audit
// log: names only, never values).
func changedKeys(before, after Spec) []string {
	var out []string
	for k, v := range after {
		if w, ok := before[k]; !ok || !reflect.DeepEqual(normal(v), normal(w)) {
			out = append(out, k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// normal makes values from YAML and JSON comparable (numbers as float64,
// as JSON reads them).
func normal(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}
