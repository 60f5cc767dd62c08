package api

import "time"

// ConfigShow is every setting's effective value and where it came from,
// and the configuration objects in effect with theirs.
type ConfigShow struct {
	Settings []Setting `json:"settings"`
	EffectiveConfig
}

// Setting is one setting; secrets read "(set, hidden)".
type Setting struct {
	Key    string `json:"key"`
	Value  string `json:"value"`
	Source string `json:"source"` // flag, environment, file, default
}

// ConfigKey is one setting coffer knows.
type ConfigKey struct {
	Key         string `json:"key"`
	Flag        string `json:"flag,omitempty"`
	Environment string `json:"environment,omitempty"`
	Default     string `json:"default"`
	Usage       string `json:"usage"`
	Secret      bool   `json:"secret"`
}

// EffectiveConfig is the configuration in effect: the configuration
// file's connections, repositories, policies and notification targets and
// matchers merged with those created through the API, each with where it
// is defined (GET /config/effective, `coffer config show`).
type EffectiveConfig struct {
	// File is the configuration file's path ("" when there is none).
	File string `json:"file"`
	// Generation is the number of the catalog's last change of an object.
	Generation int64          `json:"generation"`
	Objects    []ConfigObject `json:"objects"`
	// Overridden are objects of the catalog whose name the file defines
	// too: the file's is in effect, these are not used.
	Overridden []ConfigObject `json:"overridden"`
	// Problems are what makes the configuration in effect invalid (the
	// errors of `policy check --offline`), [] when there is none.
	Problems []string `json:"problems"`
}

// ConfigObject is one configuration object. Spec is the object in the
// configuration file's schema (the keys of an entry of its section, like
// "full-every" or "password-file"), so an entry of the file and an object
// of the API are the same text; it never holds a secret, only the names
// of the files that hold them.
type ConfigObject struct {
	// Kind is connection, repository, policy, notification-target,
	// notification-matcher, media-library, limits, latency-control,
	// resource-group or storage-snapshot-provider.
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Source is "file" (the configuration file, which only an edit of the
	// file changes) or "catalog" (created through the API).
	Source string `json:"source"`
	// Version is a catalog object's version (its ETag: changes made
	// against another version are refused); 0 for the file's objects.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at,omitzero"`
	CreatedBy string    `json:"created_by,omitempty"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
	UpdatedBy string    `json:"updated_by,omitempty"`
	// Overridden: the file defines an object of the same kind and name,
	// which is in effect instead of this one.
	Overridden bool `json:"overridden"`
	// FileKeys, for the catalog's object of a kind merged key by key with
	// the file's section (limits), are the keys of its spec that the file
	// sets too: the file's values of them are in effect.
	FileKeys []string       `json:"file_keys" doc:"keys of this object's spec that the configuration file sets too, whose values are the file's (limits)"`
	Spec     map[string]any `json:"spec"`
	// Warnings say what the object names that this server cannot use
	// (a password file it cannot read).
	Warnings []string `json:"warnings"`
}
