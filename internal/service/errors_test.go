package service

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/files"
	"github.com/coffer-backup/coffer/internal/instant"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/store"
)

// TestClassify: every core error a face must answer in its own way gets
// its class, also when wrapped; an explicit class wins; the rest is
// internal.
func TestClassify(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("open repository: %w", err) }
	cases := []struct {
		err  error
		want api.Class
	}{
		{context.Canceled, api.Cancelled},
		{crypto.ErrWrongPassword, api.Unauthenticated},
		{store.ErrPermission, api.Denied},
		{repo.ErrLocked, api.Locked},
		{repo.ErrUnsupportedVersion, api.UnsupportedVersion},
		{repo.ErrNotRepository, api.NotFound},
		{repo.ErrSnapshotNotFound, api.NotFound},
		{catalog.ErrNotFound, api.NotFound},
		{instant.ErrNoSession, api.NotFound},
		{store.ErrNoSpace, api.NoSpace},
		{restore.ErrTargetFull, api.NoSpace},
		{backup.ErrSourceChanged, api.SourceChanged},
		{crypto.ErrAuth, api.Integrity},
		{repo.ErrCorruptManifest, api.Integrity},
		{restore.ErrTargetExists, api.Conflict},
		{restore.ErrTargetNotFile, api.Invalid},
		{repo.ErrAlreadyExists, api.Conflict},
		{files.ErrUnsupported, api.Invalid},
		{repo.ErrLastKey, api.Conflict},
		{fmt.Errorf("%w: key 1a2b3c4d", repo.ErrKeyInUse), api.Conflict},
		{store.ErrRetained, api.Conflict},
		{repo.ErrKeyNotFound, api.NotFound},
		{repo.ErrAmbiguous, api.Invalid},
		{instant.ErrNotQEMU, api.Invalid},
		{fs.ErrNotExist, api.NotFound},
		{&auth.LockedError{}, api.Throttled},
		{auth.ErrUnauthenticated, api.Unauthenticated},
		{auth.ErrDenied, api.Denied},
		{auth.ErrInvalid, api.Invalid},
		{auth.ErrNotFound, api.NotFound},
		{auth.ErrConflict, api.Conflict},
		{Invalidf("bad flag"), api.Invalid},
		{api.WithClass(api.Partial, repo.ErrLocked), api.Partial},
		{errors.New("something else"), api.Internal},
	}
	seen := map[api.Class]bool{}
	for _, c := range cases {
		for _, err := range []error{c.err, wrap(c.err)} {
			if got := Classify(err); got != c.want {
				t.Errorf("Classify(%v) = %s, want %s", err, got, c.want)
			}
		}
		seen[c.want] = true
	}
	if Classify(nil) != "" {
		t.Error("nil has a class")
	}
	for _, c := range api.Classes {
		if !seen[c] {
			t.Errorf("no case gives class %s", c)
		}
	}
}
