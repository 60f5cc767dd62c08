package api

import (
	"errors"
	"fmt"
)

// Class says what kind of failure an error is, so that each face can
// answer it its own way: the command line with an exit code, the server
// with an HTTP status. internal/service.Classify gives every error its
// class.
type Class string

const (
	Invalid            Class = "invalid"             // bad input: flags, arguments, configuration, request
	Unauthenticated    Class = "unauthenticated"     // wrong password, no matching key, no credentials
	Denied             Class = "denied"              // permission denied (by the storage, or by access control)
	NotFound           Class = "not-found"           // no such repository, backup point, job, session, VM, ...
	Conflict           Class = "conflict"            // the target already exists
	Locked             Class = "locked"              // another maintenance run holds the repository's lease
	Throttled          Class = "throttled"           // too many failed sign-ins: try again later
	Integrity          Class = "integrity"           // corrupted, truncated or tampered data
	Partial            Class = "partial"             // some items failed while others succeeded
	NoSpace            Class = "no-space"            // the storage or the restore target is full
	UnsupportedVersion Class = "unsupported-version" // written by a newer coffer
	SourceChanged      Class = "source-changed"      // the source disk vanished, shrank or changed during a backup
	Cancelled          Class = "cancelled"           // interrupted
	Internal           Class = "internal"            // anything else
)

// Classes lists every class, for the faces' mapping tables and their tests.
var Classes = []Class{Invalid, Unauthenticated, Denied, NotFound, Conflict, Locked, Throttled, Integrity, Partial,
	NoSpace, UnsupportedVersion, SourceChanged, Cancelled, Internal}

// Error is the document of a failure, and an error that carries its class.
// Message says what went wrong; Detail, what to do next.
type Error struct {
	Class   Class  `json:"class"`
	Message string `json:"message"`
	Detail  string `json:"detail,omitempty"`
	cause   error
}

func (e *Error) Error() string { return e.Message }
func (e *Error) Unwrap() error { return e.cause }

// Errorf returns an error of class c; %w verbs wrap their operands as
// fmt.Errorf does, so errors.Is still finds them.
func Errorf(c Class, format string, a ...any) error {
	err := fmt.Errorf(format, a...)
	return &Error{Class: c, Message: err.Error(), cause: err}
}

// WithClass gives err the class c (nil stays nil).
func WithClass(c Class, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Class: c, Message: err.Error(), cause: err}
}

// ClassOf returns the class the outermost classed error in err's chain
// carries, and false when nothing in it has one.
func ClassOf(err error) (Class, bool) {
	var e *Error
	if errors.As(err, &e) && e.Class != "" {
		return e.Class, true
	}
	return "", false
}

// CommandError is the command line's --json document of a failure that no
// result document describes: the error and the exit code it ends with.
type CommandError struct {
	Error    Error `json:"error"`
	ExitCode int   `json:"exit_code"`
}
