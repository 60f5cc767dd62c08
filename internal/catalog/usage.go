package catalog

import (
	"context"
	"time"
)

// UsageSample is what a repository stored at a time, and what it may hold
// (0 when unknown: an object store without a configured capacity).
type UsageSample struct {
	Repository    string // repository ID
	At            time.Time
	StoredBytes   int64
	CapacityBytes int64
}

// Usage is the history of the repositories' usage. It is apart from
// Catalog: the SQL catalogs keep it, and a face without it shows no
// trend rather than failing.
type Usage interface {
	// AddUsageSample records a sample; one at the same time replaces it.
	AddUsageSample(ctx context.Context, s UsageSample) error
	// ListUsageSamples lists a repository's samples since a time, oldest
	// first.
	ListUsageSamples(ctx context.Context, repository string, since time.Time) ([]UsageSample, error)
}

// UsageOf is c's usage history, looking through wrappers that keep a
// catalog (Unwrap() Catalog); false when c keeps none.
func UsageOf(c Catalog) (Usage, bool) { return as[Usage](c) }

// as is c as a T, looking through wrappers that keep a catalog
// (Unwrap() Catalog): the optional parts of a catalog (usage, worker
// credentials) are its backend's, not a wrapper's.
func as[T any](c Catalog) (T, bool) {
	for c != nil {
		if u, ok := c.(T); ok {
			return u, true
		}
		w, ok := c.(interface{ Unwrap() Catalog })
		if !ok {
			break
		}
		c = w.Unwrap()
	}
	var zero T
	return zero, false
}
