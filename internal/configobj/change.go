package configobj

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/maintenance"
	"github.com/coffer-backup/coffer/internal/notify"
	"github.com/coffer-backup/coffer/internal/policy"
)

// Checker checks a whole configuration and returns every problem it has,
// joined (errors.Join): the file's validators, and whatever else the
// caller knows (what each connector can do). A change is refused for the
// problems it adds.
// The maintenance section is checked with the engine configuration its
// jobs name.
type Checker func(eng *policy.Config, n *notify.Config, m *maintenance.Config) error

// Verbs of changes, as operation IDs and audit records name them.
const (
	Create = "create"
	Update = "update"
	Delete = "delete"
)

// Plan is a change checked against a State, ready to be stored.
type Plan struct {
	Verb string
	Kind Kind
	Name string
	// Spec is what to store (create and update), as JSON.
	Spec []byte
	// Before is the catalog's object an update or delete replaces.
	Before Object
	// Changed names the top-level keys an update changes.
	Changed []string
	// Engine, Notify and Maintenance are the configuration the change
	// makes.
	Engine      *policy.Config
	Notify      *notify.Config
	Maintenance *maintenance.Config
}

// PlanCreate checks the creation of an object of kind k.
func (s *State) PlanCreate(k Kind, spec Spec, check Checker) (*Plan, error) {
	name, spec, err := specName(k, spec)
	if err != nil {
		return nil, err
	}
	if s.definedByFile(k, name) {
		return nil, s.fileDefined(k, name)
	}
	if o, ok := s.Stored(k, name); ok {
		other := ", or choose another name"
		if k.Singleton() {
			other = " (there is one)"
		}
		return nil, fail(ErrExists, "%s %s exists already (version %d): change it with an update%s", k, name, o.Version, other)
	}
	return s.planPut(&Plan{Verb: Create, Kind: k, Name: name}, spec, check)
}

// PlanUpdate checks the replacement of the spec of an object the catalog
// holds. The name cannot change; a spec without one keeps it.
func (s *State) PlanUpdate(k Kind, name string, spec Spec, check Checker) (*Plan, error) {
	if s.definedByFile(k, name) {
		return nil, s.fileDefined(k, name)
	}
	before, ok := s.Stored(k, name)
	if !ok {
		return nil, s.notFound(k, name)
	}
	key := k.NameKey()
	switch given, _ := spec[key].(string); {
	case spec[key] == nil:
		if !k.Singleton() {
			spec = cloneSpec(spec)
			spec[key] = name
		}
	case given != name:
		return nil, fail(ErrInvalid, "%s %s cannot be renamed (the spec names it %v): create the new one, then delete the old", k, name, spec[key])
	case k.Singleton():
		spec = cloneSpec(spec)
		delete(spec, "name")
	}
	p, err := s.planPut(&Plan{Verb: Update, Kind: k, Name: name, Before: before}, spec, check)
	if err != nil {
		return nil, err
	}
	p.Changed = changedKeys(before.Spec, spec)
	return p, nil
}

// PlanDelete checks the deletion of an object the catalog holds. One that
// other objects in effect use is refused, naming them.
func (s *State) PlanDelete(k Kind, name string, check Checker) (*Plan, error) {
	before, ok := s.Stored(k, name)
	if !ok {
		if s.definedByFile(k, name) {
			return nil, s.fileDefined(k, name)
		}
		return nil, s.notFound(k, name)
	}
	p := &Plan{Verb: Delete, Kind: k, Name: name, Before: before, Engine: s.Engine, Notify: s.Notify, Maintenance: s.Maintenance}
	if before.Overridden {
		return p, nil // the file's object stays in effect: nothing else changes
	}
	var err error
	eng, nc, m := s.Engine, s.Notify, s.Maintenance
	switch k {
	case MaintenanceWindow, MaintenanceSchedule:
		m = deleteMaintenance(m, k, name)
	case Connection:
		eng, err = eng.DeleteConnection(name)
	case Repository:
		eng, err = eng.DeleteRepository(name)
	case Policy:
		eng, err = eng.DeletePolicy(name)
	case NotificationTarget:
		nc, err = nc.DeleteTarget(name)
	case NotificationMatcher:
		nc, err = nc.DeleteMatcher(name)
	case MediaLibrary:
		eng, err = eng.DeleteMediaLibrary(name)
	case Replication:
		eng, err = eng.DeleteReplication(name)
	case FailoverPlan:
		eng, err = eng.DeleteFailoverPlan(name)
	default:
		eng = deleteSetting(eng, s.File.Engine.Limits, k, name)
	}
	var inUse *policy.InUseError
	if errors.As(err, &inUse) || (k == NotificationTarget && nc == nil) {
		return nil, fail(ErrInUse, "%v%s", err, s.fileUsers(k, name))
	}
	if eng == nil || nc == nil {
		return nil, fail(ErrInvalid, "%v", err)
	}
	p.Engine, p.Notify, p.Maintenance = eng, nc, m
	if err := newProblems(check(s.Engine, s.Notify, s.Maintenance), check(eng, nc, m)); err != nil {
		return nil, fail(ErrInvalid, "%v", err)
	}
	return p, nil
}

// PlanDraft checks an object that is not to be stored (a draft the
// console previews) as a creation would, but over the object of its name
// wherever that is defined: the Plan's configuration is what saving it
// would make.
func (s *State) PlanDraft(k Kind, spec Spec, check Checker) (*Plan, error) {
	name, spec, err := specName(k, spec)
	if err != nil {
		return nil, err
	}
	return s.planPut(&Plan{Verb: "draft", Kind: k, Name: name}, spec, check)
}

// planPut decodes spec with the file's decoder of its kind, puts it into
// the configuration and checks what that makes.
func (s *State) planPut(p *Plan, spec Spec, check Checker) (*Plan, error) {
	js, err := specJSON(p.Kind, spec)
	if err != nil {
		return nil, err
	}
	v, err := decode(p.Kind, js)
	if err != nil {
		return nil, err
	}
	eng, nc := s.Engine, s.Notify
	m, _ := putMaintenance(s.Maintenance, v) // s.Maintenance when v is no maintenance entry
	switch x := v.(type) {
	case maintenance.Window, maintenance.Repository:
	case policy.Connection:
		eng, _ = eng.PutConnection(x)
	case policy.Repository:
		eng, _ = eng.PutRepository(x)
	case policy.Policy:
		eng, _ = eng.PutPolicy(x)
	case notify.Target:
		nc, _ = nc.PutTarget(x)
	case notify.Matcher:
		nc, _ = nc.PutMatcher(x)
	case policy.MediaLibrary:
		eng, _ = eng.PutMediaLibrary(x)
	case policy.Replication:
		eng, _ = eng.PutReplication(x)
	case policy.FailoverPlan:
		eng, _ = eng.PutFailoverPlan(x)
	default:
		eng, _ = putSetting(eng, s.File.Engine.Limits, v)
	}
	if err := newProblems(check(s.Engine, s.Notify, s.Maintenance), check(eng, nc, m)); err != nil {
		return nil, fail(ErrInvalid, "%v", err)
	}
	p.Spec, p.Engine, p.Notify, p.Maintenance = js, eng, nc, m
	return p, nil
}

// specName is the name of the object a spec of kind k makes, and the spec
// to store: the one of a singleton kind has no name key (its name is
// SingletonName, which a spec may give).
func specName(k Kind, spec Spec) (string, Spec, error) {
	name, _ := spec["name"].(string)
	if k.Singleton() {
		if spec["name"] != nil && name != SingletonName {
			return "", nil, fail(ErrInvalid, "there is one %s object, named %s: leave the name out", k, SingletonName)
		}
		spec = cloneSpec(spec)
		delete(spec, "name")
		return SingletonName, spec, nil
	}
	if k.NameKey() != "name" {
		name, _ = spec[k.NameKey()].(string)
	}
	if name == "" {
		return "", nil, fail(ErrInvalid, "the %s has no name (\"%s\": \"...\")", k, k.NameKey())
	}
	return name, spec, checkName(k, name)
}

func (s *State) fileDefined(k Kind, name string) error {
	where := "the configuration file"
	if s.File.Path != "" {
		where += " " + s.File.Path
	}
	return fail(ErrFileDefined, "%s %s is defined in %s, which wins over the API for the names it defines: "+
		"change it there (or remove it there to manage it through the API)", k, name, where)
}

func (s *State) notFound(k Kind, name string) error {
	return fail(catalog.ErrNotFound, "no %s named %q was created through the API (`coffer config list %s` lists them)", k, name, k.Plural())
}

// fileUsers says which of the objects that use k/name the file defines:
// those only an edit of the file can change.
func (s *State) fileUsers(k Kind, name string) string {
	var users []string
	switch k {
	case Connection, Repository:
		for _, p := range s.File.Engine.Policies {
			if (k == Connection && slices.Contains(p.ConnectionNames(), name)) || (k == Repository && p.Repository == name) {
				users = append(users, "policy "+p.Name)
			}
		}
	case NotificationTarget:
		for _, m := range s.File.Notify.Matchers {
			if slices.Contains(m.Targets, name) {
				users = append(users, "matcher "+m.Name)
			}
		}
	}
	if len(users) == 0 {
		return ""
	}
	where := "the configuration file"
	if s.File.Path != "" {
		where += " " + s.File.Path
	}
	return fmt.Sprintf(" (%s: defined in %s, to be changed there)", strings.Join(users, ", "), where)
}

func cloneSpec(s Spec) Spec {
	out := make(Spec, len(s)+1)
	for k, v := range s {
		out[k] = v
	}
	return out
}
