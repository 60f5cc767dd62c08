// Package autherr holds the classes of access-control errors, so that
// auth and the identity providers under it (package idp) return errors of
// one set of classes: errors.Is(err, auth.ErrDenied) and so on.
package autherr

import (
	"errors"
	"fmt"
)

// The classes of access-control errors, named as the error classes of
// docs/design/server.md: errors.Is(err, autherr.ErrDenied) and so on. The
// audit log records the class (Class), never the message.
var (
	// ErrUnauthenticated: no valid credentials (sign in, or a valid API
	// token).
	ErrUnauthenticated = errors.New("unauthenticated")
	// ErrDenied: authenticated, but not allowed.
	ErrDenied = errors.New("denied")
	// ErrInvalid: bad input (a weak password, an unknown role...).
	ErrInvalid = errors.New("invalid")
	// ErrNotFound: no such user, token or ACL entry.
	ErrNotFound = errors.New("not-found")
	// ErrConflict: it exists already, or the change would leave nobody
	// able to manage access.
	ErrConflict = errors.New("conflict")
	// ErrLocked: too many failed sign-ins; auth.LockedError says until when.
	ErrLocked = errors.New("locked")
)

// Errorf makes an error of class that reads as the message alone.
func Errorf(class error, format string, args ...any) error {
	return &classed{class: class, msg: fmt.Sprintf(format, args...)}
}

type classed struct {
	class error
	msg   string
}

func (e *classed) Error() string { return e.msg }
func (e *classed) Unwrap() error { return e.class }

// BadCredentials is a sign-in refused for its name or password, whatever
// the cause (no such user, a disabled one, a wrong password): the message
// says no more, so that names cannot be probed.
var BadCredentials = Errorf(ErrUnauthenticated, "wrong user name or password")
