package configobj

import (
	"fmt"
	"slices"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/maintenance"
	"github.com/coffer-backup/coffer/internal/notify"
	"github.com/coffer-backup/coffer/internal/policy"
)

// File is what the configuration file says: its engine sections and its
// notifications section, decoded (not validated: Merge does not judge).
type File struct {
	// Path is the file's path, "" when there is none.
	Path   string
	Engine *policy.Config
	Notify *notify.Config
	// Maintenance is the maintenance section (nil: none).
	Maintenance *maintenance.Config
}

// Object is one configuration object as it is in effect.
type Object struct {
	Kind   Kind
	Name   string
	Source Source
	// Version, the times and authors are the catalog's (zero for the
	// file's objects): Version is the object's ETag.
	Version   int64
	CreatedAt time.Time
	CreatedBy string
	UpdatedAt time.Time
	UpdatedBy string
	// Spec is the object in the file's schema; it holds no secret.
	Spec Spec
	// Overridden marks an object of the catalog whose name the file
	// defines too (the file gained it after the object was created): the
	// file's is in effect and this one is not used.
	Overridden bool
	// FileKeys, for an object of the catalog of a singleton kind
	// (limits), are the keys of its spec that the file sets too: the
	// file's values of them are in effect, the object's of the others.
	FileKeys []string
}

// State is the configuration in effect: the file's objects and the
// catalog's, merged.
type State struct {
	File File
	// Generation is the catalog's generation the state was made from.
	Generation int64
	// Engine and Notify are the merged configuration (the file's entries
	// first, then the catalog's), what the engine, the checks and the
	// notifier run on; delivery settings are the file's alone.
	Engine *policy.Config
	Notify *notify.Config
	// Maintenance is the merged maintenance section: the file's, with
	// the catalog's windows and repositories' jobs for the names the
	// file does not use.
	Maintenance *maintenance.Config
	// Objects are the objects in effect, by kind (Kinds' order) and
	// name; Overridden, the catalog's objects the file overrides.
	Objects    []Object
	Overridden []Object
}

// Merge makes the configuration in effect from the file and the objects
// stored in the catalog (read at generation gen): the file wins for the
// names it defines, the catalog's objects fill in the rest. A stored
// object that no longer decodes is an error naming it.
func Merge(f File, stored []catalog.ConfigObject, gen int64) (*State, error) {
	if f.Engine == nil {
		f.Engine = &policy.Config{}
	}
	if f.Notify == nil {
		f.Notify = &notify.Config{}
	}
	eng, nc := *f.Engine, *f.Notify
	eng.Connections, eng.Repositories, eng.Policies = slices.Clone(eng.Connections), slices.Clone(eng.Repositories), slices.Clone(eng.Policies)
	eng.MediaLibraries, eng.Replications = slices.Clone(eng.MediaLibraries), slices.Clone(eng.Replications)
	eng.FailoverPlans = slices.Clone(eng.FailoverPlans)
	eng.LatencyControl, eng.ResourceGroups = slices.Clone(eng.LatencyControl), slices.Clone(eng.ResourceGroups)
	eng.StorageSnapshots = slices.Clone(eng.StorageSnapshots)
	nc.Targets, nc.Matchers = slices.Clone(nc.Targets), slices.Clone(nc.Matchers)
	if f.Maintenance == nil {
		f.Maintenance = &maintenance.Config{}
	}
	s := &State{File: f, Generation: gen, Engine: &eng, Notify: &nc, Maintenance: cloneMaintenance(f.Maintenance)}
	for _, v := range fileObjects(f) {
		spec, err := encode(v.value)
		if err != nil {
			return nil, fmt.Errorf("%s %s of the configuration file: %w", v.kind, v.name, err)
		}
		s.Objects = append(s.Objects, Object{Kind: v.kind, Name: v.name, Source: FromFile, Spec: spec})
	}
	for _, o := range stored {
		obj, v, err := fromCatalog(o)
		if err != nil {
			return nil, err
		}
		if s.definedByFile(obj.Kind, obj.Name) {
			obj.Overridden = true
			s.Overridden = append(s.Overridden, obj)
			continue
		}
		if obj.Kind.Singleton() {
			if f, ok := s.fileObject(obj.Kind, obj.Name); ok {
				obj.FileKeys = fileKeys(f.Spec, obj.Spec)
			}
		}
		s.add(v)
		s.Objects = append(s.Objects, obj)
	}
	sortObjects(s.Objects)
	sortObjects(s.Overridden)
	return s, nil
}

// fromCatalog reads a stored object.
func fromCatalog(o catalog.ConfigObject) (Object, any, error) {
	k, err := ParseKind(o.Kind)
	if err != nil {
		return Object{}, nil, fmt.Errorf("catalog object %s %s (version %d): %w: was it written by a newer coffer?", o.Kind, o.Name, o.Version, err)
	}
	v, err := decode(k, o.Spec)
	if err == nil && nameOf(v) != o.Name {
		err = fmt.Errorf("its spec names it %q", nameOf(v))
	}
	spec, perr := ParseSpec(o.Spec)
	if err == nil {
		err = perr
	}
	if err != nil {
		return Object{}, nil, fmt.Errorf("%s %s of the catalog (version %d) no longer reads: %w "+
			"(change it with `coffer config update`, or delete it)", k, o.Name, o.Version, err)
	}
	return Object{Kind: k, Name: o.Name, Source: FromCatalog, Version: o.Version, CreatedAt: o.CreatedAt, CreatedBy: o.CreatedBy,
		UpdatedAt: o.UpdatedAt, UpdatedBy: o.UpdatedBy, Spec: spec}, v, nil
}

type typed struct {
	kind  Kind
	value any
	name  string
}

// fileObjects lists the file's objects in Kinds' order.
func fileObjects(f File) []typed {
	var out []typed
	for _, x := range f.Engine.Connections {
		out = append(out, typed{Connection, x, x.Name})
	}
	for _, x := range f.Engine.Repositories {
		out = append(out, typed{Repository, x, x.Name})
	}
	for _, x := range f.Engine.Policies {
		out = append(out, typed{Policy, x, x.Name})
	}
	for _, x := range f.Notify.Targets {
		out = append(out, typed{NotificationTarget, x, x.Name})
	}
	for _, x := range f.Notify.Matchers {
		out = append(out, typed{NotificationMatcher, x, x.Name})
	}
	for _, x := range f.Engine.MediaLibraries {
		out = append(out, typed{MediaLibrary, x, x.Name})
	}
	for _, x := range f.Engine.Replications {
		out = append(out, typed{Replication, x, x.Name})
	}
	for _, x := range f.Engine.FailoverPlans {
		out = append(out, typed{FailoverPlan, x, x.Name})
	}
	out = append(out, fileSettings(f.Engine)...)
	if f.Maintenance != nil {
		out = append(out, fileMaintenance(f.Maintenance)...)
	}
	return out
}

// definedByFile reports whether the file defines an object of that kind
// and name, which the API then cannot change. The file's object of a
// singleton kind is merged with the catalog's key by key instead.
func (s *State) definedByFile(k Kind, name string) bool {
	if k.Singleton() {
		return false
	}
	for _, v := range fileObjects(s.File) {
		if v.kind == k && v.name == name {
			return true
		}
	}
	return false
}

// fileObject is the file's object of that kind and name, in effect.
func (s *State) fileObject(k Kind, name string) (Object, bool) {
	for _, o := range s.Objects {
		if o.Kind == k && o.Name == name && o.Source == FromFile {
			return o, true
		}
	}
	return Object{}, false
}

// add appends a decoded object to the merged configuration.
func (s *State) add(v any) {
	switch x := v.(type) {
	case policy.Connection:
		s.Engine.Connections = append(s.Engine.Connections, x)
	case policy.Repository:
		s.Engine.Repositories = append(s.Engine.Repositories, x)
	case policy.Policy:
		s.Engine.Policies = append(s.Engine.Policies, x)
	case notify.Target:
		s.Notify.Targets = append(s.Notify.Targets, x)
	case notify.Matcher:
		s.Notify.Matchers = append(s.Notify.Matchers, x)
	case policy.MediaLibrary:
		s.Engine.MediaLibraries = append(s.Engine.MediaLibraries, x)
	case policy.Replication:
		s.Engine.Replications = append(s.Engine.Replications, x)
	case policy.FailoverPlan:
		s.Engine.FailoverPlans = append(s.Engine.FailoverPlans, x)
	case maintenance.Window, maintenance.Repository:
		s.Maintenance, _ = putMaintenance(s.Maintenance, v)
	default:
		s.Engine, _ = putSetting(s.Engine, s.File.Engine.Limits, v)
	}
}

func sortObjects(os []Object) {
	slices.SortStableFunc(os, func(a, b Object) int {
		if d := kindIndex(a.Kind) - kindIndex(b.Kind); d != 0 {
			return d
		}
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
}

// Lookup returns the object of that kind and name in effect; of a
// singleton kind, the catalog's when there is one (the one the API
// changes: its FileKeys say what the file's sets instead).
func (s *State) Lookup(k Kind, name string) (Object, bool) {
	var found *Object
	for i, o := range s.Objects {
		if o.Kind == k && o.Name == name && (found == nil || o.Source == FromCatalog) {
			found = &s.Objects[i]
		}
	}
	if found == nil {
		return Object{}, false
	}
	return *found, true
}

// Stored returns the catalog's object of that kind and name, in effect
// or overridden.
func (s *State) Stored(k Kind, name string) (Object, bool) {
	for _, list := range [][]Object{s.Objects, s.Overridden} {
		for _, o := range list {
			if o.Kind == k && o.Name == name && o.Source == FromCatalog {
				return o, true
			}
		}
	}
	return Object{}, false
}

// Of lists the objects of one kind in effect, then those the file
// overrides.
func (s *State) Of(k Kind) []Object {
	var out []Object
	for _, list := range [][]Object{s.Objects, s.Overridden} {
		for _, o := range list {
			if o.Kind == k {
				out = append(out, o)
			}
		}
	}
	return out
}

// FromCatalogCount is how many of the objects in effect come from the
// catalog (for messages that say where the configuration came from).
func (s *State) FromCatalogCount() int {
	n := 0
	for _, o := range s.Objects {
		if o.Source == FromCatalog {
			n++
		}
	}
	return n
}
