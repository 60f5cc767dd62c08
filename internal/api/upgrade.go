package api

import "time"

// UpgradeCheckInput asks what an upgrade to this coffer would change: it
// has no parameters.
type UpgradeCheckInput struct{}

// UpgradeCheck is what `coffer upgrade check` finds, before anything
// changes: what this coffer would migrate, and what of other versions
// shares the catalog, the repositories and the configuration.
type UpgradeCheck struct {
	// Version is this coffer's.
	Version string `json:"version"`
	// Catalog is where the catalog's schema stands against this coffer.
	Catalog CatalogSchema `json:"catalog"`
	// LeaseHolders are the live leases held by a coffer of another
	// version than this one.
	LeaseHolders []LeaseHolder `json:"lease_holders"`
	// Repositories are the configured repositories and their format.
	Repositories []RepositoryFormat `json:"repositories"`
	// DeprecatedKeys are keys of the configuration file that a later
	// release removes.
	DeprecatedKeys []DeprecatedKey `json:"deprecated_keys"`
	// Ready is true when nothing stands in the way: no catalog or
	// repository newer than this coffer, none unreachable.
	Ready bool `json:"ready"`
}

// CatalogSchema is a catalog's schema against this coffer's migrations.
type CatalogSchema struct {
	Location string `json:"location"`
	// Schema is the newest migration the catalog has had; Known, the
	// newest this coffer knows.
	Schema int `json:"schema"`
	Known  int `json:"known"`
	// Pending are the migrations this coffer applies when it opens the
	// catalog ("0016_name"), oldest first.
	Pending []string `json:"pending"`
	// Newer: a newer coffer migrated it; this one refuses it.
	Newer bool `json:"newer"`
	// Error is why the catalog could not be read.
	Error string `json:"error,omitempty"`
}

// LeaseHolder is a live lease of the catalog and the coffer holding it.
type LeaseHolder struct {
	Lease  string `json:"lease"`
	Holder string `json:"holder"`
	// Version is the holder's coffer version, "" when it names none
	// (v0.1.0 and earlier).
	Version   string    `json:"version"`
	ExpiresAt time.Time `json:"expires_at"`
}

// RepositoryFormat is a configured repository's format version.
type RepositoryFormat struct {
	Name     string `json:"name"`
	Location string `json:"location"`
	// FormatVersion is the repository's (0 when it could not be read);
	// Supported, the newest this coffer reads and the one it writes.
	FormatVersion int `json:"format_version"`
	Supported     int `json:"supported_format"`
	// State: "same", "older" (this coffer reads it), "newer" (this
	// coffer refuses it), "missing" (no repository there yet) or
	// "unreachable" (Error says why).
	State string `json:"state"`
	Error string `json:"error,omitempty"`
}

// DeprecatedKey is a key of the configuration file that a later release
// removes, and what replaces it.
type DeprecatedKey struct {
	Key     string `json:"key"`
	File    string `json:"file"`
	Since   string `json:"since"`
	Instead string `json:"instead"`
}
