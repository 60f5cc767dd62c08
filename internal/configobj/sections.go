package configobj

import (
	"fmt"
	"reflect"
	"slices"

	"go.yaml.in/yaml/v3"

	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/policy"
)

// The engine's settings as objects: limits, latency-control entries,
// resource groups and storage snapshot providers. They are what the
// engine reads at the start of each job (engine.Reload), so a change
// takes effect for the jobs that start after every server has reloaded.
//
// How the file wins:
//   - limits is one object (SingletonName), merged with the file's
//     section key by key: a key the file sets (to anything but 0, which
//     is the same as not setting it) is the file's, the object fills in
//     the others;
//   - the entries of the other sections are by name, as policies are:
//     the file's come first (the first latency-control entry naming a
//     datastore applies, the provider of a datastore is the longest
//     covering root, the first of equals), then the catalog's, whose
//     names the file does not define. A latency-control entry of the
//     file may have no name: it is listed as #N (its place), a name no
//     object of the API can take.

// settingSections are the file's sections of the engine's settings.
var settingSections = map[Kind]string{Limits: "limits", LatencyControl: "latency-control", ResourceGroup: "resource-groups",
	StorageProvider: "storage-snapshots"}

// decodeSetting decodes an entry of an engine setting's section with the
// file's decoder (see decode).
func decodeSetting(k Kind, entry, list *yaml.Node) (any, error) {
	section := settingSections[k]
	switch k {
	case Limits:
		var out policy.Limits
		return out, config.DecodeNode(entry, &out, section)
	case LatencyControl:
		return decodeFirst[policy.LatencyControl](list, section)
	case ResourceGroup:
		return decodeFirst[policy.ResourceGroup](list, section)
	case StorageProvider:
		return decodeFirst[policy.StorageProvider](list, section)
	}
	return nil, fail(ErrInvalid, "unknown kind %q", k)
}

func decodeFirst[T any](list *yaml.Node, section string) (T, error) {
	var out []T
	if err := config.DecodeNode(list, &out, section); err != nil {
		var zero T
		return zero, err
	}
	return out[0], nil
}

// settingName is the name of a decoded engine setting ("" when v is none).
func settingName(v any) string {
	switch x := v.(type) {
	case policy.Limits:
		return SingletonName
	case policy.LatencyControl:
		return x.Name
	case policy.ResourceGroup:
		return x.Name
	case policy.StorageProvider:
		return x.Name
	}
	return ""
}

// fileSettings lists the file's engine settings as objects.
func fileSettings(eng *policy.Config) []typed {
	var out []typed
	if eng.Limits != (policy.Limits{}) {
		out = append(out, typed{Limits, eng.Limits, SingletonName})
	}
	for i, x := range eng.LatencyControl {
		name := x.Name
		if name == "" {
			name = fmt.Sprintf("#%d", i+1)
		}
		out = append(out, typed{LatencyControl, x, name})
	}
	for _, x := range eng.ResourceGroups {
		out = append(out, typed{ResourceGroup, x, x.Name})
	}
	for _, x := range eng.StorageSnapshots {
		out = append(out, typed{StorageProvider, x, x.Name})
	}
	return out
}

// putSetting puts a decoded engine setting into a copy of the
// configuration: limits under the file's (fileLimits wins key by key),
// entries in place of the one of their name, or last.
func putSetting(eng *policy.Config, fileLimits policy.Limits, v any) (*policy.Config, bool) {
	n := *eng
	switch x := v.(type) {
	case policy.Limits:
		n.Limits = underFile(fileLimits, x)
	case policy.LatencyControl:
		n.LatencyControl = putNamed(n.LatencyControl, x, func(y policy.LatencyControl) string { return y.Name })
	case policy.ResourceGroup:
		n.ResourceGroups = putNamed(n.ResourceGroups, x, func(y policy.ResourceGroup) string { return y.Name })
	case policy.StorageProvider:
		n.StorageSnapshots = putNamed(n.StorageSnapshots, x, func(y policy.StorageProvider) string { return y.Name })
	default:
		return eng, false
	}
	return &n, true
}

// deleteSetting removes the catalog's engine setting k/name from a copy
// of the configuration (limits fall back to the file's).
func deleteSetting(eng *policy.Config, fileLimits policy.Limits, k Kind, name string) *policy.Config {
	n := *eng
	switch k {
	case Limits:
		n.Limits = fileLimits
	case LatencyControl:
		n.LatencyControl = dropNamed(n.LatencyControl, name, func(y policy.LatencyControl) string { return y.Name })
	case ResourceGroup:
		n.ResourceGroups = dropNamed(n.ResourceGroups, name, func(y policy.ResourceGroup) string { return y.Name })
	case StorageProvider:
		n.StorageSnapshots = dropNamed(n.StorageSnapshots, name, func(y policy.StorageProvider) string { return y.Name })
	}
	return &n
}

// underFile is the limits in effect: the file's, each key it leaves
// unset (0) taken from the object.
func underFile(file, object policy.Limits) policy.Limits {
	out := file
	o, a := reflect.ValueOf(&out).Elem(), reflect.ValueOf(object)
	for i := range o.NumField() {
		if o.Field(i).IsZero() {
			o.Field(i).Set(a.Field(i))
		}
	}
	return out
}

// fileKeys are the keys of an object's spec that the file sets too, for
// a singleton kind: the object's values of them are not in effect.
func fileKeys(fileSpec, spec Spec) []string {
	var out []string
	for k := range spec {
		if _, ok := fileSpec[k]; ok && k != "name" {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// putNamed returns a copy of list with x in place of the entry of its
// name, or appended.
func putNamed[T any](list []T, x T, name func(T) string) []T {
	out := slices.Clone(list)
	if i := slices.IndexFunc(out, func(y T) bool { return name(y) == name(x) }); i >= 0 {
		out[i] = x
		return out
	}
	return append(out, x)
}

// dropNamed returns a copy of list without the last entry named name
// (the catalog's come after the file's).
func dropNamed[T any](list []T, name string, nameOf func(T) string) []T {
	out := slices.Clone(list)
	for i := len(out) - 1; i >= 0; i-- {
		if nameOf(out[i]) == name {
			return slices.Delete(out, i, i+1)
		}
	}
	return out
}
