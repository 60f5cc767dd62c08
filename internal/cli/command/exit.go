package command

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/service"
)

// Exit codes, documented in `coffer help exit-codes` and docs/11-troubleshooting.md
// (docs/reference/exit-codes.md is generated from ExitCodeHelp).
const (
	ExitOK          = 0
	ExitFailure     = 1  // any other error
	ExitUsage       = 2  // bad flags, arguments or configuration; a target that exists
	ExitAccess      = 3  // wrong password, no key, permission denied
	ExitLocked      = 4  // repository locked by maintenance
	ExitIntegrity   = 5  // corruption found (verify, or while reading)
	ExitPartial     = 6  // some items (VMs, disks, files) failed, others succeeded
	ExitNoRepo      = 7  // not a repository / no such backup point, job, session, connection or VM
	ExitVersion     = 8  // repository format newer than this coffer
	ExitNoSpace     = 9  // storage full
	ExitSource      = 10 // the source disk vanished, shrank or changed
	ExitInterrupted = 130
)

// ExitCodes maps every error class (internal/service.Classify) to its exit
// code. It is the only place where errors become exit codes.
var ExitCodes = map[api.Class]int{
	api.Invalid:            ExitUsage,
	api.Conflict:           ExitUsage,
	api.Unauthenticated:    ExitAccess,
	api.Denied:             ExitAccess,
	api.Locked:             ExitLocked,
	api.Throttled:          ExitAccess,
	api.Integrity:          ExitIntegrity,
	api.Partial:            ExitPartial,
	api.NotFound:           ExitNoRepo,
	api.UnsupportedVersion: ExitVersion,
	api.NoSpace:            ExitNoSpace,
	api.SourceChanged:      ExitSource,
	api.Cancelled:          ExitInterrupted,
	api.Internal:           ExitFailure,
}

var ExitCodeHelp = `EXIT STATUS
    0    success
    1    failure not covered below
    2    usage error: bad flags, arguments or configuration file, or a
         target that already exists
    3    access denied: wrong password, no matching key, permission denied by the storage
         or by the server (no valid token, a privilege missing, too many failed sign-ins)
    4    repository locked: another maintenance run holds the lease (it names the holder)
    5    integrity error: corrupted, truncated or tampered repository data was found
    6    partial failure: some VMs or disks failed while others succeeded, or
         files get/find skipped entries (it lists them)
    7    not found: no repository at the location, or no such backup point,
         job, instant recovery session, connection or VM
    8    unsupported format: the repository was written by a newer coffer
    9    no space left in the repository storage (or restore target)
    10   the source disk vanished, shrank or changed during the backup
    130  interrupted (Ctrl-C); a re-run reuses everything already stored
`

// Usagef is an error in how coffer was called.
func Usagef(format string, a ...any) error { return api.Errorf(api.Invalid, format, a...) }

// Reported marks a failure whose details the command already printed:
// with --json its result document describes it, so no error document
// follows. Advised: what was printed says what to do next, so no advice
// line either.
type Reported struct {
	Err     error
	Advised bool
}

func (r Reported) Error() string { return r.Err.Error() }
func (r Reported) Unwrap() error { return r.Err }

// exitCode maps an error to the documented exit code.
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	if code, ok := ExitCodes[service.Classify(err)]; ok {
		return code
	}
	return ExitFailure
}

// advice adds what to do next to well-known errors.
func advice(err error) string {
	var r Reported
	if errors.As(err, &r) && r.Advised {
		return ""
	}
	switch exitCode(err) {
	case ExitAccess:
		if errors.Is(err, crypto.ErrWrongPassword) {
			return "check --password-file / COFFER_PASSWORD_FILE / COFFER_PASSWORD (`coffer key list` shows the keys of the repository)"
		}
		return "check the credentials and the permissions of the repository location"
	case ExitLocked:
		return "wait for it to finish; a crashed holder's lease expires by itself (`coffer locks` lists leases)"
	case ExitIntegrity:
		return "run `coffer verify --read-data` to see exactly which backups are affected; other backups remain restorable"
	case ExitVersion:
		if errors.Is(err, catalog.ErrNewerSchema) {
			return "upgrade coffer here too: a newer coffer migrated this catalog (`coffer upgrade check` tells before an upgrade)"
		}
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

// errorDoc is the --json document of a failure nothing else described.
func errorDoc(err error) api.CommandError {
	return api.CommandError{Error: api.Error{Class: service.Classify(err), Message: err.Error(), Detail: advice(err)}, ExitCode: exitCode(err)}
}

// Exit reports err, what a command ended with, as the person or the
// script expects (an error document with --json, a message and advice on
// stderr otherwise) and returns the process exit code.
func (a *App) Exit(ctx context.Context, err error) int {
	if err == nil {
		return ExitOK
	}
	if strings.HasPrefix(err.Error(), "unknown command") || strings.HasPrefix(err.Error(), "unknown flag") ||
		strings.HasPrefix(err.Error(), "unknown shorthand") || strings.Contains(err.Error(), "argument") && strings.Contains(err.Error(), "accepts") {
		err = api.WithClass(api.Invalid, err)
	}
	if ctx.Err() != nil && !errors.Is(err, context.Canceled) {
		err = api.Errorf(api.Cancelled, "%w: %w", context.Canceled, err)
	}
	code := exitCode(err)
	var r Reported
	if a.JSON && errors.As(err, &r) {
		return code // the result document already describes the problems
	}
	if a.JSON {
		_ = json.NewEncoder(a.Stdout).Encode(errorDoc(err))
	} else {
		fmt.Fprintf(a.Stderr, "coffer: %v\n", err)
		if hint := advice(err); hint != "" {
			fmt.Fprintf(a.Stderr, "coffer: %s\n", hint)
		}
	}
	return code
}

// Emit prints a command's result document (as JSON, or with text) and
// returns err, marked as reported when there is one: the document already
// describes it.
func (a *App) Emit(doc any, err error, text func()) error {
	if a.JSON {
		if perr := a.printJSON(doc); perr != nil {
			return perr
		}
	} else if text != nil {
		text()
	}
	if err != nil {
		return Reported{Err: err}
	}
	return nil
}
