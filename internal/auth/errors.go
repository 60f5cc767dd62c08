package auth

import (
	"errors"
	"fmt"
	"github.com/coffer-backup/coffer/internal/auth/autherr"
	"time"
)

// The classes of access-control errors (package autherr, which the
// identity providers share), named as the error classes of
// docs/design/server.md: errors.Is(err, auth.ErrDenied) and so on. The
// audit log records the class (Class), never the message.
var (
	ErrUnauthenticated = autherr.ErrUnauthenticated
	ErrDenied          = autherr.ErrDenied
	ErrInvalid         = autherr.ErrInvalid
	ErrNotFound        = autherr.ErrNotFound
	ErrConflict        = autherr.ErrConflict
	ErrLocked          = autherr.ErrLocked
)

var classes = []error{ErrUnauthenticated, ErrDenied, ErrInvalid, ErrNotFound, ErrConflict, ErrLocked}

// Class returns the class of an error of this package ("denied",
// "locked"...), "internal" for any other error and "" for nil: what the
// audit log records.
func Class(err error) string {
	if err == nil {
		return ""
	}
	for _, c := range classes {
		if errors.Is(err, c) {
			return c.Error()
		}
	}
	return "internal"
}

// errorf makes an error of class that reads as the message alone.
var errorf = autherr.Errorf

// LockedError is returned for a sign-in attempted while failed attempts
// lock the user or the remote address. It wraps ErrLocked.
type LockedError struct {
	// Until is when the next attempt is allowed.
	Until time.Time
	// Address reports that the remote address is locked (else the user
	// name typed).
	Address bool
	now     time.Time
}

func (e *LockedError) Error() string {
	who := "for this user"
	if e.Address {
		who = "from this address"
	}
	wait := e.Until.Sub(e.now).Round(time.Second)
	return fmt.Sprintf("too many failed sign-ins %s: try again after %s (in %s)", who,
		e.Until.UTC().Format(time.RFC3339), wait)
}

func (e *LockedError) Unwrap() error { return ErrLocked }

// RetryAfter is how long to wait from the moment of the refusal (the
// server's Retry-After header).
func (e *LockedError) RetryAfter() time.Duration { return e.Until.Sub(e.now) }
