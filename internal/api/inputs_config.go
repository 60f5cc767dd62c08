package api

import (
	"strconv"
	"strings"
)

// The inputs of the operations on the configuration and notifications
// (see inputs.go).

// ConfigNameParam names a configuration object.
type ConfigNameParam struct {
	Name string `path:"name" minLength:"1" maxLength:"255" example:"nightly" doc:"the object's name"`
}

// GetEffectiveConfigInput asks for the configuration in effect: it has
// no parameters.
type GetEffectiveConfigInput struct{}

// TestNotificationTargetInput names the notification target to test.
type TestNotificationTargetInput struct {
	ConfigNameParam
}

// IfMatchParam is the version a change is made on.
type IfMatchParam struct {
	IfMatch string `header:"If-Match" maxLength:"64" doc:"the ETag read with the object (\"12\"): the change is refused (412) if the object changed since; absent or *: whatever it is now"`
}

// IfVersion is the If-Match of a change made on version v of an object
// (0: whatever it is now).
func IfVersion(v int64) IfMatchParam {
	if v == 0 {
		return IfMatchParam{}
	}
	return IfMatchParam{IfMatch: ObjectETag(v)}
}

// ObjectETag is the ETag of version v of a configuration object: "12".
func ObjectETag(v int64) string { return strconv.Quote(strconv.FormatInt(v, 10)) }

// Version reads If-Match: one strong ETag as GET gives it ("12"), or "*"
// or nothing for no condition (0).
func (p IfMatchParam) Version() (int64, error) {
	h := strings.TrimSpace(p.IfMatch)
	if h == "" || h == "*" {
		return 0, nil
	}
	v, err := strconv.ParseInt(strings.Trim(h, `"`), 10, 64)
	if err != nil || v <= 0 || strings.Count(h, `"`) == 1 {
		return 0, Errorf(Invalid, "If-Match %q is not an ETag of a configuration object: send the ETag its GET answered with, like \"12\"", h)
	}
	return v, nil
}

// The operations on configuration objects are generic: each kind has its
// own five (list-policies, get-policy, create-policy...), whose kind is
// the operation's, not a parameter.

// ListConfigObjectsInput lists the objects of the operation's kind: it
// has no parameters.
type ListConfigObjectsInput struct{}

// GetConfigObjectInput names the object of the operation's kind to read.
type GetConfigObjectInput struct {
	ConfigNameParam
}

// CreateConfigObjectInput is a new object of the operation's kind.
type CreateConfigObjectInput struct {
	Body map[string]any `doc:"the object in the configuration file's schema: one entry of its section, with its name"`
}

// UpdateConfigObjectInput replaces an object of the operation's kind.
type UpdateConfigObjectInput struct {
	ConfigNameParam
	IfMatchParam
	Body map[string]any `doc:"the whole object in the configuration file's schema (keys left out take their defaults)"`
}

// DeleteConfigObjectInput names the object of the operation's kind to
// delete.
type DeleteConfigObjectInput struct {
	ConfigNameParam
	IfMatchParam
}
