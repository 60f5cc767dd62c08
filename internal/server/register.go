package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/service"
)

// defaultBodyBytes bounds a request body when the operation sets nothing:
// every request document is small.
const defaultBodyBytes = 64 << 10

// register registers one operation of the table: its route, documented
// from the table, and the guard that checks the caller before its
// endpoint runs.
func (s *Server) register(op *service.Operation) {
	hop := huma.Operation{
		OperationID: op.ID, Method: op.HTTP, Path: op.Path, Summary: op.Summary, Description: describe(op),
		Tags: []string{tag(op)}, MaxBodyBytes: defaultBodyBytes, Errors: errorStatuses,
		Middlewares: huma.Middlewares{s.guard(op)},
	}
	if op.MaxBodyBytes > 0 {
		hop.MaxBodyBytes = op.MaxBodyBytes
	}
	if takesHeader(op, "If-Match") {
		hop.Errors = append(slices.Clone(errorStatuses), http.StatusPreconditionFailed)
	}
	if !op.Public {
		hop.Security = []map[string][]string{{"token": {}}, {"session": {}}}
	}
	op.Endpoint.Register(s.api, hop, binding{s})
}

// takesHeader reports an operation whose input reads the header.
func takesHeader(op *service.Operation, name string) bool {
	var find func(t reflect.Type) bool
	find = func(t reflect.Type) bool {
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct && find(f.Type) {
				return true
			}
			if f.Tag.Get("header") == name {
				return true
			}
		}
		return false
	}
	return find(op.Endpoint.Input())
}

// describe documents who may call an operation.
func describe(op *service.Operation) string {
	if op.Public {
		return "Needs no credentials: " + op.SelfService + "."
	}
	if len(op.Requires) == 0 {
		return "Any signed-in caller: " + op.SelfService + "."
	}
	var parts []string
	for _, r := range op.Requires {
		switch r.Reach {
		case service.ThroughVM:
			parts = append(parts, fmt.Sprintf("%s on %s or on the point's VM", r.Privilege, r.Object))
		case service.Listing:
			parts = append(parts, fmt.Sprintf("%s (lists what the caller holds it on, at or below %s)", r.Privilege, r.Object))
		default:
			parts = append(parts, fmt.Sprintf("%s on %s", r.Privilege, r.Object))
		}
	}
	return "Requires " + strings.Join(parts, " and ") + "."
}

type serviceKey struct{}

// guard is the one access check: it authenticates the caller, binds the
// service to the request's repository, checks every privilege the
// operation requires on its object before the endpoint runs, and records
// the call in the audit log (mutating operations, and every refusal).
func (s *Server) guard(op *service.Operation) func(huma.Context, func(huma.Context)) {
	return func(hc huma.Context, next func(huma.Context)) {
		r, w := humago.Unwrap(hc)
		rec := recordOf(r.Context())
		rec.op = op.ID
		ctx := service.WithRemoteAddr(hc.Context(), r.RemoteAddr)
		var subject *auth.Subject
		refuse := func(object string, err error) {
			rec.class = service.Classify(err)
			s.audit(ctx, op, subject, object, r.RemoteAddr, err)
			writeProblem(w, err)
		}
		if !op.Public {
			var err error
			if subject, err = s.cfg.Access.AuthenticateRequest(ctx, r); err != nil {
				refuse("", err)
				return
			}
			if subject.Pending != "" && !op.DuringSignIn {
				refuse("", subject.PendingError())
				return
			}
			ctx = auth.WithSubject(ctx, subject)
			// The tasks the operation starts are the caller's.
			ctx = job.WithUser(ctx, job.User{Name: subject.User, Token: subject.TokenID})
			rec.user, rec.token = subject.User, subject.TokenID
		}
		svc := s.cfg.Service
		// A newer coffer migrated the shared catalog: no new work here
		// (reads, and signing in and out, go on).
		if err := svc.Superseded(); err != nil && op.Mutating() && !op.Public {
			refuse("", err)
			return
		}
		if strings.Contains(op.Path, "{repo}") {
			var err error
			if svc, err = svc.ForRepository(ctx, hc.Param("repo")); err != nil {
				refuse("", err)
				return
			}
		}
		object := ""
		for i, req := range op.Requires {
			path := objectPath(req.Object, hc)
			if i == 0 {
				object = path
			}
			if err := s.check(ctx, svc, subject, req, path, hc); err != nil {
				refuse(path, err)
				return
			}
		}
		rec.object = object
		ctx = context.WithValue(ctx, serviceKey{}, svc)
		next(huma.WithContext(hc, ctx))
		if op.Mutating() && !op.AuditsItself {
			if rec.class == "" {
				rec.class = api.Class(w.Header().Get(api.ErrorClassHeader)) // a document with its error
			}
			if rec.class == "" && hc.Status() >= 400 {
				rec.class = classOf(hc.Status())
			}
			var err error
			if rec.class != "" {
				err = api.Errorf(rec.class, "%s", rec.class)
			}
			s.audit(context.WithoutCancel(ctx), op, subject, object, r.RemoteAddr, err)
		}
	}
}

// check checks one requirement of an operation.
func (s *Server) check(ctx context.Context, svc *service.Service, subject *auth.Subject, req service.Requirement, path string, hc huma.Context) error {
	priv := req.Privilege
	switch req.Reach {
	case service.Listing:
		if auth.AllowedBelow(subject, path, priv) ||
			(priv&repoPrivileges != 0 && auth.AllowedBelow(subject, auth.ConnectionsPath, priv)) {
			return nil
		}
	case service.ThroughVM:
		if auth.Allowed(subject, path, priv) {
			return nil
		}
		if auth.AllowedBelow(subject, auth.ConnectionsPath, priv) {
			conn, vm, err := svc.PointVM(ctx, hc.Param("point"))
			if err != nil {
				return err
			}
			if vmPath := auth.VMPath(conn, vm); auth.Allowed(subject, vmPath, priv) {
				return nil
			}
		}
	default:
		if auth.Allowed(subject, path, priv) {
			return nil
		}
	}
	return api.Errorf(api.Denied, "%s lacks %s on %s", subject, priv, path)
}

const repoPrivileges = auth.RepoAudit | auth.RepoRead | auth.RepoBackup | auth.RepoVerify | auth.RepoPrune | auth.RepoModify

// objectPath fills an ACL path template with the request's path and
// query parameters (escaped as ACL paths are); an empty one ends the path
// there.
func objectPath(template string, hc huma.Context) string {
	if template == auth.RootPath {
		return template
	}
	var out []string
	for _, c := range strings.Split(strings.TrimPrefix(template, "/"), "/") {
		if name, ok := strings.CutPrefix(c, "{"); ok {
			name = strings.TrimSuffix(name, "}")
			v := hc.Param(name)
			if v == "" {
				v = hc.Query(name)
			}
			if v == "" {
				break
			}
			c = url.PathEscape(v)
		}
		out = append(out, c)
	}
	return "/" + strings.Join(out, "/")
}

// audit records a call; a failure to record is logged (the answer stays
// the operation's).
func (s *Server) audit(ctx context.Context, op *service.Operation, subject *auth.Subject, object, remote string, err error) {
	e := auth.Event{Subject: subject, Operation: op.ID, Object: object, RemoteAddr: remote, Err: err}
	if err != nil {
		e.ErrorClass = string(service.Classify(err))
	}
	if aerr := s.cfg.Access.Record(ctx, e); aerr != nil {
		s.log.Error("audit record failed", "operation", op.ID, "err", aerr)
	}
}

// binding is what the server gives every endpoint.
type binding struct{ s *Server }

func (b binding) Service(ctx context.Context) (*service.Service, error) {
	svc, _ := ctx.Value(serviceKey{}).(*service.Service)
	if svc == nil {
		return nil, api.Errorf(api.Internal, "no service bound to the request")
	}
	return svc, nil
}

func (b binding) Error(ctx context.Context, err error) error {
	rec := recordOf(ctx)
	rec.class = service.Classify(err)
	if rec.class == api.Internal {
		rec.err = err.Error()
	}
	return problemOf(err)
}

func (b binding) Stream(hc huma.Context, contentType, filename string, write func(io.Writer) error) {
	b.s.stream(hc, contentType, filename, write)
}

func (b binding) Events(hc huma.Context, run func(int64, func(string, int64, any) error) error) {
	b.s.events(hc, run)
}

// operationIDs are the IDs of the registered routes, read back from the
// OpenAPI document.
func (s *Server) operationIDs() map[string]bool {
	out := map[string]bool{}
	for _, pi := range s.api.OpenAPI().Paths {
		for _, o := range []*huma.Operation{pi.Get, pi.Post, pi.Put, pi.Delete, pi.Patch} {
			if o != nil {
				out[o.OperationID] = true
			}
		}
	}
	return out
}

// OperationIDs are the operations the server registers routes for.
func OperationIDs() map[string]bool { return New(Config{}).operationIDs() }
