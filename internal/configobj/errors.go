package configobj

import (
	"errors"
	"fmt"
)

// The errors of changes, each wrapped with a message that says what to do
// (internal/service.Classify gives them their classes).
var (
	// ErrInvalid: the object, or the configuration the change would
	// make, is not valid (the file's messages).
	ErrInvalid = errors.New("invalid configuration object")
	// ErrFileDefined: the configuration file defines the object, which
	// only an edit of the file can change.
	ErrFileDefined = errors.New("defined in the configuration file")
	// ErrExists: an object of that kind and name exists already.
	ErrExists = errors.New("configuration object exists")
	// ErrInUse: other objects use the one to delete.
	ErrInUse = errors.New("configuration object in use")
)

// classed is an error of one of the kinds above whose message is the
// message alone ("policy w: unknown connection ...", not prefixed with
// the kind's name).
type classed struct {
	class error
	msg   string
}

func (e *classed) Error() string        { return e.msg }
func (e *classed) Is(target error) bool { return target == e.class }

// fail returns an error of class (ErrInvalid, ...) with the message of
// format; %w operands stay reachable with errors.Is.
func fail(class error, format string, a ...any) error {
	err := fmt.Errorf(format, a...)
	return &classedWrap{classed{class: class, msg: err.Error()}, err}
}

// classedWrap keeps the operands of %w reachable (catalog.ErrNotFound).
type classedWrap struct {
	classed
	cause error
}

func (e *classedWrap) Unwrap() error { return e.cause }

// Problems flattens joined errors into their messages.
func Problems(err error) []string {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []string
		for _, e := range j.Unwrap() {
			out = append(out, Problems(e)...)
		}
		return out
	}
	return []string{err.Error()}
}

// newProblems is what after says that before did not: a change is
// refused for the problems it makes, not for those the configuration
// already had (a file that names a connection nobody defined yet must
// not block every change through the API).
func newProblems(before, after error) error {
	had := map[string]bool{}
	for _, p := range Problems(before) {
		had[dropLines(p)] = true
	}
	var out []error
	for _, p := range Problems(after) {
		// A line of the file in a message about an object given as a
		// spec points at nothing its sender wrote.
		if p = dropLines(p); !had[p] {
			out = append(out, errors.New(p))
		}
	}
	return errors.Join(out...)
}
