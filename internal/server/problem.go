package server

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/danielgtaylor/huma/v2"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/service"
)

// statusOf maps every error class to its HTTP status: the one place where
// errors become statuses (the command line's is internal/cli/command/exit.go).
// A class that comes with a document answers 200 with it instead
// (service.Endpoint); these are the answers without one.
var statusOf = map[api.Class]int{
	api.Invalid:            http.StatusBadRequest,
	api.Unauthenticated:    http.StatusUnauthorized,
	api.Denied:             http.StatusForbidden,
	api.NotFound:           http.StatusNotFound,
	api.Conflict:           http.StatusConflict,
	api.Locked:             http.StatusLocked,          // a repository's maintenance lease
	api.Throttled:          http.StatusTooManyRequests, // failed sign-ins, with Retry-After
	api.Integrity:          http.StatusUnprocessableEntity,
	api.Partial:            http.StatusUnprocessableEntity, // only without a document, which is rare
	api.NoSpace:            http.StatusInsufficientStorage,
	api.UnsupportedVersion: http.StatusUnprocessableEntity,
	api.SourceChanged:      http.StatusConflict,
	api.Cancelled:          499, // the client went away, or the server stopped the operation
	api.Internal:           http.StatusInternalServerError,
}

// classOf is the class of an HTTP status huma answers by itself (bad
// JSON, an unknown field, a body too large, a route that does not exist).
func classOf(status int) api.Class {
	switch {
	case status == http.StatusUnauthorized:
		return api.Unauthenticated
	case status == http.StatusForbidden:
		return api.Denied
	case status == http.StatusNotFound || status == http.StatusMethodNotAllowed:
		return api.NotFound
	case status == http.StatusTooManyRequests:
		return api.Throttled
	case status >= 400 && status < 500:
		return api.Invalid
	}
	return api.Internal
}

// ProblemDetails is an error answer: RFC 9457 problem details (application/
// problem+json) with the error's class, as the command line's --json
// prints it.
type ProblemDetails struct {
	huma.ErrorModel
	Class api.Class `json:"class" enum:"invalid,unauthenticated,denied,not-found,conflict,locked,throttled,integrity,partial,no-space,unsupported-version,source-changed,cancelled,internal" doc:"what kind of failure: the classes of coffer's errors (its exit codes on the command line)"`
}

func init() {
	// Every error huma answers by itself (bad JSON, unknown fields,
	// bodies too large, validation) is a Problem too.
	huma.NewError = func(status int, msg string, errs ...error) huma.StatusError {
		p := &ProblemDetails{ErrorModel: huma.ErrorModel{Status: status, Title: http.StatusText(status), Detail: msg}, Class: classOf(status)}
		var what []string
		for _, e := range errs {
			if e != nil {
				p.Add(e)
				d := p.Errors[len(p.Errors)-1]
				what = append(what, strings.TrimSpace(d.Location+" "+d.Message))
			}
		}
		if len(what) > 0 {
			// The message says what is wrong, not only that something is.
			p.Detail += ": " + strings.Join(what, "; ")
		}
		return p
	}
}

// problemOf turns an operation's error into its answer: the status of its
// class, and Retry-After for a locked sign-in.
func problemOf(err error) error {
	var se huma.StatusError
	if errors.As(err, &se) {
		return err // huma's own (validation), already a Problem
	}
	class := service.Classify(err)
	status, ok := statusOf[class]
	if !ok {
		class, status = api.Internal, http.StatusInternalServerError
	}
	if class == api.Conflict && service.Stale(err) {
		status = http.StatusPreconditionFailed // an If-Match the object no longer matches
	}
	p := &ProblemDetails{ErrorModel: huma.ErrorModel{Status: status, Title: http.StatusText(status), Detail: err.Error()}, Class: class}
	if p.Title == "" {
		p.Title = "Cancelled"
	}
	var locked *auth.LockedError
	if errors.As(err, &locked) {
		secs := int(math.Ceil(max(locked.RetryAfter().Seconds(), 1)))
		return huma.ErrorWithHeaders(p, http.Header{"Retry-After": {strconv.Itoa(secs)}})
	}
	return p
}

// writeProblem answers a request outside huma's operations (an unknown
// route, a failed sign-in check in the middleware) with a Problem.
func writeProblem(w http.ResponseWriter, err error) {
	perr := problemOf(err)
	var he huma.HeadersError
	if errors.As(perr, &he) {
		for k, vs := range he.GetHeaders() {
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
	}
	var p *ProblemDetails
	if !errors.As(perr, &p) {
		p = &ProblemDetails{ErrorModel: huma.ErrorModel{Status: 500, Title: "Internal Server Error", Detail: perr.Error()}, Class: api.Internal}
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}

// errorStatuses are the error answers every operation documents.
var errorStatuses = []int{http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound,
	http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType, http.StatusUnprocessableEntity, http.StatusLocked,
	http.StatusTooManyRequests, 499, http.StatusInternalServerError, http.StatusInsufficientStorage}
