// Package configobj is the configuration coffer runs on: the
// configuration file's connections, repositories, policies, notification
// targets and matchers, media libraries and the engine's settings (limits,
// latency-control entries, resource groups, storage snapshot providers:
// sections.go), merged with the objects of the same kinds created through
// the API and stored in the catalog.
//
// The file wins: an object the file defines is the file's, and the API
// can neither change nor shadow it (people who keep the configuration in
// git keep control of what they wrote); objects created through the API
// fill in the names the file does not use. Merge is the one place this
// rule is applied, and everything that reads the configuration (the
// engine, policy check and preview, the server's schedules, `coffer
// config show`, GET /config/effective) reads its State.
//
// An object's spec is the object in the configuration file's schema (the
// keys of an entry of its section: `full-every`, `password-file`), decoded
// by the file's own strict decoders and checked by its validators, so an
// object says the same thing and fails with the same messages wherever it
// is written. Secrets are never part of a spec: they stay in files the
// spec names (password-file, secret-file), as in the configuration file.
package configobj

import (
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Kind is a kind of configuration object.
type Kind string

const (
	Connection          Kind = "connection"
	Repository          Kind = "repository"
	Policy              Kind = "policy"
	NotificationTarget  Kind = "notification-target"
	NotificationMatcher Kind = "notification-matcher"
	MediaLibrary        Kind = "media-library"
	// Replication keeps standby copies of VMs on DR hosts.
	Replication Kind = "replication"
	// FailoverPlan starts a replication's standbys in ordered groups.
	FailoverPlan Kind = "failover-plan"
	// The engine's settings (sections.go): limits is one object, merged
	// with the file's section key by key; the others are entries of
	// their sections, by name.
	Limits          Kind = "limits"
	LatencyControl  Kind = "latency-control"
	ResourceGroup   Kind = "resource-group"
	StorageProvider Kind = "storage-snapshot-provider"
	// The maintenance section's windows and each repository's jobs
	// (maintenance.go), by name and by repository.
	MaintenanceWindow   Kind = "maintenance-window"
	MaintenanceSchedule Kind = "maintenance-schedule"
)

// Kinds lists every kind, in the order objects are listed (what others
// depend on first).
var Kinds = []Kind{Connection, Repository, Policy, NotificationTarget, NotificationMatcher, MediaLibrary, Replication, FailoverPlan,
	Limits, LatencyControl, ResourceGroup, StorageProvider, MaintenanceWindow, MaintenanceSchedule}

var plurals = map[Kind]string{
	Connection: "connections", Repository: "repositories", Policy: "policies",
	NotificationTarget: "notification-targets", NotificationMatcher: "notification-matchers",
	MediaLibrary: "media-libraries", Replication: "replications", FailoverPlan: "failover-plans", Limits: "limits", LatencyControl: "latency-controls",
	ResourceGroup: "resource-groups", StorageProvider: "storage-snapshot-providers",
	MaintenanceWindow: "maintenance-windows", MaintenanceSchedule: "maintenance-schedules",
}

// SingletonName is the name of the one object of a singleton kind
// (limits): the configuration has one such section, not a list.
const SingletonName = "default"

// Singleton reports whether the kind has one object, merged with the
// file's section key by key (the file wins for the keys it sets), rather
// than objects by name.
func (k Kind) Singleton() bool { return k == Limits }

// NameKey is the key of a spec that names its object: name, or for a
// maintenance schedule the repository whose jobs it holds.
func (k Kind) NameKey() string {
	if k == MaintenanceSchedule {
		return "repository"
	}
	return "name"
}

// Plural names the kind's collection ("policies"), as API paths do.
func (k Kind) Plural() string { return plurals[k] }

// ParseKind accepts a kind in the singular or the plural.
func ParseKind(s string) (Kind, error) {
	for _, k := range Kinds {
		if s == string(k) || s == k.Plural() {
			return k, nil
		}
	}
	var names []string
	for _, k := range Kinds {
		names = append(names, string(k))
	}
	return "", fail(ErrInvalid, "%q is not a kind of configuration object (%s)", s, strings.Join(names, ", "))
}

// Path is the object's access-control path, which its audit records
// name: /connections/NAME, /repositories/NAME, /policies/NAME; targets
// and matchers, and the engine's settings, are the system's (their
// privilege is Sys.Modify on /system), and replications, below /system;
// media libraries are
// /media/NAME.
func (k Kind) Path(name string) string {
	switch k {
	case NotificationTarget, NotificationMatcher, Limits, LatencyControl, ResourceGroup, StorageProvider, MaintenanceWindow, MaintenanceSchedule, Replication, FailoverPlan:
		return "/system/" + k.Plural() + "/" + url.PathEscape(name)
	case MediaLibrary:
		return "/media/" + url.PathEscape(name)
	}
	return "/" + k.Plural() + "/" + url.PathEscape(name)
}

// Source says where an object is defined.
type Source string

const (
	FromFile    Source = "file"
	FromCatalog Source = "catalog"
)

// namePattern keeps the names of objects created through the API usable
// in API and access-control paths (the rule of notification targets).
// Names the file gives are the file's business.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func checkName(k Kind, name string) error {
	if !namePattern.MatchString(name) {
		return fail(ErrInvalid, "%s name %q: a name is 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", k, name)
	}
	return nil
}

func kindIndex(k Kind) int { return slices.Index(Kinds, k) }
