// Package store defines where a coffer repository keeps its bytes: a flat
// namespace of opaque, named objects. A store knows nothing of chunks, packs
// or backups; the repository layer (internal/repo) builds those on top, so a
// new backend (local directory, S3, ...) never changes the repository format.
//
// Every backend must pass the conformance suite in internal/store/storetest.
//
// # The contract a backend guarantees
//
//   - Atomic visibility: an object written through Create is invisible until
//     Commit returns nil, and then visible whole. A crash, a kill -9, an
//     Abort or a failed Commit never leaves a partial object under the name.
//   - Durability: once Commit returns nil the object survives a crash of the
//     writer and of the machine (local: fsync of file and directory).
//   - Read-after-write: after Commit returns, Read, Stat and List of the
//     same store see the object (list consistency is what S3 offers today).
//   - Replace: committing a name that exists replaces it atomically unless
//     a condition is given; readers see the old or the new object, never a mix.
//   - Conditions: IfNotExists and IfMatch are evaluated atomically with the
//     commit, so two writers racing for one name cannot both win. A backend
//     that cannot do this reports Properties().ConditionalWrites == false
//     and the repository falls back to a documented, weaker protocol.
//   - Names are slash-separated, made of [A-Za-z0-9._-] and "/", without
//     empty segments; backends may map them to their own layout (the local
//     backend shards data/ into subdirectories) but List returns the names
//     exactly as they were written.
//
// Errors are translated at the boundary to the sentinels below, wrapped with
// context; callers test them with errors.Is.
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Sentinel errors every backend maps its native errors to.
var (
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("object not found")
	// ErrExists: IfNotExists was set and the name already exists.
	ErrExists = errors.New("object already exists")
	// ErrPreconditionFailed: IfMatch did not match the current version.
	ErrPreconditionFailed = errors.New("object changed concurrently (precondition failed)")
	// ErrPermission: the credentials may not perform this operation
	// (file mode, S3 403). Permanent: never retried.
	ErrPermission = errors.New("permission denied")
	// ErrRetained: the object is under retention (S3 Object Lock, or a
	// backend's own immutability) and cannot be deleted or overwritten yet.
	ErrRetained = errors.New("object is under retention")
	// ErrNoSpace: the backend is out of space (ENOSPC, quota).
	ErrNoSpace = errors.New("no space left in storage")
	// ErrInvalidRange: a read asked for bytes beyond the end of an object.
	ErrInvalidRange = errors.New("invalid range")
)

// Store is a flat namespace of named objects. All methods are safe for
// concurrent use.
type Store interface {
	// Create starts writing a new object. Nothing is visible under name
	// until Commit succeeds. The writer must be finished with Commit or
	// Abort; the context bounds the whole write.
	Create(ctx context.Context, name string, opts PutOptions) (ObjectWriter, error)

	// Read returns length bytes of the object starting at off. A negative
	// length reads to the end. Reading past the end returns ErrInvalidRange.
	Read(ctx context.Context, name string, off, length int64) (io.ReadCloser, error)

	// Stat describes one object.
	Stat(ctx context.Context, name string) (ObjectInfo, error)

	// List calls fn for every object whose name starts with prefix, in no
	// particular order. Returning an error from fn stops the listing and is
	// returned by List.
	List(ctx context.Context, prefix string, fn func(ObjectInfo) error) error

	// Delete removes an object. Deleting a missing object returns
	// ErrNotFound; an object under retention returns ErrRetained.
	Delete(ctx context.Context, name string) error

	// Properties describes what this backend can do.
	Properties() Properties

	// Close releases resources (connections, file handles).
	Close() error
}

// ObjectWriter receives the bytes of one object.
type ObjectWriter interface {
	io.Writer
	// Commit makes the object durable and visible atomically, honouring the
	// PutOptions given to Create, and returns its description.
	Commit() (ObjectInfo, error)
	// Abort discards everything written. Safe to call after Commit (no-op).
	Abort() error
}

// PutOptions are conditions and attributes of a write.
type PutOptions struct {
	// IfNotExists makes Commit fail with ErrExists when name exists.
	IfNotExists bool
	// IfMatch makes Commit fail with ErrPreconditionFailed unless the
	// current object's Version equals it.
	IfMatch string
	// RetainUntil asks the backend to make the object immutable until this
	// time (S3 Object Lock). Backends without retention ignore it and say so
	// in Properties.
	RetainUntil time.Time
	// SizeHint, when known, lets a backend pick a single request or a
	// multipart upload up front.
	SizeHint int64
}

// ObjectInfo describes a stored object.
type ObjectInfo struct {
	Name    string
	Size    int64
	ModTime time.Time
	// Version identifies this exact object content for IfMatch (an S3 ETag,
	// or the local backend's own version tag).
	Version string
	// RetainUntil is the object's retention, zero when none or unknown.
	RetainUntil time.Time
}

// Properties tell the repository layer how to use a backend.
type Properties struct {
	// Location is a display form of the store (path or s3:// URL), never
	// containing credentials.
	Location string
	// Connections is the number of parallel requests the backend serves
	// well; the repository sizes its worker pools from it.
	Connections int
	// ConditionalWrites reports atomic IfNotExists/IfMatch support.
	ConditionalWrites bool
	// Retention reports that RetainUntil is enforced by the backend.
	Retention bool
	// Remote is true for network backends; the repository then caches
	// metadata locally.
	Remote bool
}

// Retainer is implemented by backends that can extend the retention of an
// existing object (S3 PutObjectRetention). Retention can only be extended,
// never shortened.
type Retainer interface {
	ExtendRetention(ctx context.Context, name string, until time.Time) error
}

// Version is one version of an object on a backend that keeps versions.
type Version struct {
	Name    string
	ID      string // the backend's version ID
	Marker  bool   // a delete marker: from here on the object looks deleted
	ModTime time.Time
	// RetainUntil is this version's retention, zero for delete markers and
	// versions without a lock.
	RetainUntil time.Time
}

// Versioned is implemented by backends that keep the earlier versions of
// an object (an S3 bucket with versioning, which Object Lock implies).
// There a lock protects one version only: a rewrite stacks an unlocked
// version on top of it, a delete an unlocked delete marker, and readers
// see whatever is on top.
type Versioned interface {
	// Versions calls fn once for each object name starting with prefix,
	// with all its versions and delete markers, oldest first.
	Versions(ctx context.Context, prefix string, fn func(name string, versions []Version) error) error
	// ExtendVersionRetention locks one version until at least until
	// (never shortening it).
	ExtendVersionRetention(ctx context.Context, v Version, until time.Time) error
	// DeleteVersion removes one version or delete marker for good; a
	// locked version returns ErrRetained.
	DeleteVersion(ctx context.Context, v Version) error
}

// Janitor is implemented by backends whose interrupted writes leave
// invisible leftovers that cost space: the local backend's temp files, S3's
// incomplete multipart uploads. Garbage collection calls it with a cutoff
// far older than any live write.
type Janitor interface {
	RemoveLeftovers(ctx context.Context, olderThan time.Time) (int, error)
}

// Put writes a whole object from memory: a convenience over Create.
func Put(ctx context.Context, s Store, name string, data []byte, opts PutOptions) (ObjectInfo, error) {
	if opts.SizeHint == 0 {
		opts.SizeHint = int64(len(data))
	}
	w, err := s.Create(ctx, name, opts)
	if err != nil {
		return ObjectInfo{}, err
	}
	if _, err := w.Write(data); err != nil {
		_ = w.Abort()
		return ObjectInfo{}, err
	}
	return w.Commit()
}

// Get reads a whole object (or a range) into memory.
func Get(ctx context.Context, s Store, name string, off, length int64) ([]byte, error) {
	rc, err := s.Read(ctx, name, off, length)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	if length < 0 {
		return io.ReadAll(rc)
	}
	buf := make([]byte, length)
	if _, err := io.ReadFull(rc, buf); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return buf, nil
}
