package service

import (
	"context"
	"errors"
	"io/fs"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/configobj"
	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/engine"
	"github.com/coffer-backup/coffer/internal/files"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/instant"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/storagesnap"
	"github.com/coffer-backup/coffer/internal/store"
)

// Classify gives an error its class. It is the one place where core errors
// become classes: the command line maps classes to exit codes, the server
// to HTTP statuses. A class given explicitly (api.Errorf, api.WithClass)
// wins; an error nothing here knows is internal.
func Classify(err error) api.Class {
	if err == nil {
		return ""
	}
	if c, ok := api.ClassOf(err); ok {
		return c
	}
	switch {
	case errors.Is(err, auth.ErrLocked):
		return api.Throttled
	case errors.Is(err, auth.ErrUnauthenticated):
		return api.Unauthenticated
	case errors.Is(err, auth.ErrDenied):
		return api.Denied
	case errors.Is(err, auth.ErrInvalid):
		return api.Invalid
	case errors.Is(err, auth.ErrNotFound):
		return api.NotFound
	case errors.Is(err, auth.ErrConflict):
		return api.Conflict
	case errors.Is(err, context.Canceled):
		return api.Cancelled
	case errors.Is(err, crypto.ErrWrongPassword):
		return api.Unauthenticated
	case errors.Is(err, store.ErrPermission):
		return api.Denied
	case errors.Is(err, repo.ErrLocked):
		return api.Locked
	case errors.Is(err, repo.ErrUnsupportedVersion), errors.Is(err, catalog.ErrNewerSchema):
		return api.UnsupportedVersion
	case errors.Is(err, repo.ErrNotRepository), errors.Is(err, repo.ErrSnapshotNotFound),
		errors.Is(err, catalog.ErrNotFound), errors.Is(err, instant.ErrNoSession), errors.Is(err, hypervisor.ErrNotFound),
		errors.Is(err, storagesnap.ErrKeptNotFound):
		return api.NotFound
	case errors.Is(err, store.ErrNoSpace):
		return api.NoSpace
	case errors.Is(err, backup.ErrSourceChanged):
		return api.SourceChanged
	case repo.IsDamaged(err), errors.Is(err, crypto.ErrAuth):
		return api.Integrity
	case errors.Is(err, restore.ErrTargetExists), errors.Is(err, repo.ErrAlreadyExists), errors.Is(err, storagesnap.ErrDiskInUse):
		return api.Conflict
	case errors.Is(err, repo.ErrLastKey), errors.Is(err, repo.ErrKeyInUse), errors.Is(err, store.ErrRetained):
		return api.Conflict // refused: it would lose access, or the storage keeps it locked
	case errors.Is(err, repo.ErrKeyNotFound):
		return api.NotFound
	case errors.Is(err, repo.ErrAmbiguous), errors.Is(err, instant.ErrNotQEMU), errors.Is(err, restore.ErrTargetNotFile),
		errors.Is(err, hypervisor.ErrUnsupported), errors.Is(err, engine.ErrCannotLock): // asked of a VM, point or repository that cannot do it
		return api.Invalid
	case errors.Is(err, files.ErrUnsupported):
		return api.Invalid // files asked of a disk without a readable file system
	case errors.Is(err, fs.ErrNotExist):
		return api.NotFound // a path inside a backup, a restore target's directory
	case errors.Is(err, configobj.ErrInvalid):
		return api.Invalid
	case errors.Is(err, configobj.ErrFileDefined), errors.Is(err, configobj.ErrExists), errors.Is(err, configobj.ErrInUse),
		errors.Is(err, catalog.ErrStale), errors.Is(err, catalog.ErrConflict):
		return api.Conflict
	}
	return api.Internal
}

// Invalidf is an error in what the caller asked for.
func Invalidf(format string, a ...any) error { return api.Errorf(api.Invalid, format, a...) }

// Stale reports a change refused because the object changed since the
// version it was made on (the server answers 412 Precondition Failed).
func Stale(err error) bool { return errors.Is(err, catalog.ErrStale) }
