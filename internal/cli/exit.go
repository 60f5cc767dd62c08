package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/store"
)

// Exit codes, documented in `coffer help exit-codes` and the README.
const (
	ExitOK          = 0
	ExitFailure     = 1  // any other error
	ExitUsage       = 2  // bad flags, arguments or configuration
	ExitAccess      = 3  // wrong password, no key, permission denied
	ExitLocked      = 4  // repository locked by maintenance
	ExitIntegrity   = 5  // corruption found (verify, or while reading)
	ExitPartial     = 6  // some items (VMs, disks, files) failed, others succeeded
	ExitNoRepo      = 7  // not a repository / snapshot not found
	ExitVersion     = 8  // repository format newer than this coffer
	ExitNoSpace     = 9  // storage full
	ExitSource      = 10 // the source disk vanished, shrank or changed
	ExitInterrupted = 130
)

var exitCodeHelp = `EXIT STATUS
    0    success
    1    failure not covered below
    2    usage error: bad flags, arguments or configuration file
    3    access denied: wrong password, no matching key, permission denied by the storage
    4    repository locked: another maintenance run holds the lease (it names the holder)
    5    integrity error: corrupted, truncated or tampered repository data was found
    6    partial failure: some VMs or disks failed while others succeeded, or
         files get/find skipped entries (it lists them)
    7    not found: no repository at the location, or no such snapshot
    8    unsupported format: the repository was written by a newer coffer
    9    no space left in the repository storage (or restore target)
    10   the source disk vanished, shrank or changed during the backup
    130  interrupted (Ctrl-C); a re-run reuses everything already stored
`

// usageError marks errors in how coffer was called.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// partialError reports a partial failure with its details already printed.
type partialError struct{ msg string }

func (p partialError) Error() string { return p.msg }

// reportedError is a failure whose details the command already printed
// (with --json, its result document describes it); its exit code is that
// of the wrapped error.
type reportedError struct{ err error }

func (r reportedError) Error() string { return r.err.Error() }
func (r reportedError) Unwrap() error { return r.err }

// integrityError reports corruption found by verify; reported means the
// command already printed what to do next.
type integrityError struct {
	msg      string
	reported bool
}

func (p integrityError) Error() string { return p.msg }

// exitCode maps an error to the documented exit code. It is the only place
// where errors become exit codes.
func exitCode(err error) int {
	var (
		u usageError
		p partialError
		i integrityError
	)
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &u):
		return ExitUsage
	case errors.As(err, &p):
		return ExitPartial
	case errors.As(err, &i):
		return ExitIntegrity
	case errors.Is(err, context.Canceled):
		return ExitInterrupted
	case errors.Is(err, crypto.ErrWrongPassword), errors.Is(err, store.ErrPermission):
		return ExitAccess
	case errors.Is(err, repo.ErrLocked):
		return ExitLocked
	case errors.Is(err, repo.ErrUnsupportedVersion):
		return ExitVersion
	case errors.Is(err, repo.ErrNotRepository), errors.Is(err, repo.ErrSnapshotNotFound):
		return ExitNoRepo
	case errors.Is(err, store.ErrNoSpace):
		return ExitNoSpace
	case errors.Is(err, backup.ErrSourceChanged):
		return ExitSource
	case repo.IsDamaged(err), errors.Is(err, crypto.ErrAuth):
		return ExitIntegrity
	case errors.Is(err, restore.ErrTargetExists), errors.Is(err, repo.ErrAlreadyExists):
		return ExitUsage
	}
	return ExitFailure
}

// advice adds what to do next to well-known errors.
func advice(err error) string {
	switch exitCode(err) {
	case ExitAccess:
		if errors.Is(err, crypto.ErrWrongPassword) {
			return "check --password-file / COFFER_PASSWORD_FILE / COFFER_PASSWORD (`coffer key list` shows the keys of the repository)"
		}
		return "check the credentials and the permissions of the repository location"
	case ExitLocked:
		return "wait for it to finish; a crashed holder's lease expires by itself (`coffer locks` lists leases)"
	case ExitIntegrity:
		var i integrityError
		if errors.As(err, &i) && i.reported {
			return ""
		}
		return "run `coffer verify --read-data` to see exactly which backups are affected; other backups remain restorable"
	case ExitVersion:
		return "upgrade coffer to open this repository"
	case ExitNoSpace:
		if errors.Is(err, restore.ErrTargetFull) {
			return "free space there or restore somewhere else; an interrupted restore continues with --resume"
		}
		return "free space or add capacity, then re-run: what was already stored is reused"
	case ExitSource:
		return "the backup was not recorded; re-run it once the source is stable"
	case ExitInterrupted:
		return "re-run the command: data already stored is reused"
	}
	return ""
}
