package service

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/telemetry"
)

// Invoke runs an operation by its ID in this process, with the input the
// server would decode from a request (a pointer to the operation's input
// type, its defaults applied as the server applies them), and returns its
// document: the command line calls its operations this way when no server
// is configured, and through the server (internal/apiclient) with the
// very same input when one is. The access checks of the operation table
// are the server's: a process that invokes directly has the repository
// and the catalog at hand anyway (Config.Local).
func (s *Service) Invoke(ctx context.Context, id string, in any) (any, error) {
	doc, _, err := s.InvokePage(ctx, id, in)
	return doc, err
}

// InvokePage is Invoke for a paged listing: it also returns the cursor of
// the next page ("" after the last).
func (s *Service) InvokePage(ctx context.Context, id string, in any) (doc any, next string, err error) {
	op := OperationByID(s.Config.Operations, id)
	if op == nil {
		return nil, "", api.Errorf(api.Internal, "no operation %q", id)
	}
	c, ok := op.Endpoint.(caller)
	if !ok {
		return nil, "", api.Errorf(api.Internal, "operation %s answers with a stream: call its service method", id)
	}
	if err := api.ApplyDefaults(in); err != nil {
		return nil, "", api.WithClass(api.Internal, fmt.Errorf("operation %s: %w", id, err))
	}
	ctx, span := telemetry.Operation(ctx, id, false)
	start := time.Now()
	doc, next, err = c.call(ctx, s, in)
	s.logOperation(ctx, id, start, err)
	if err != nil {
		span.Set("coffer.error_class", string(Classify(err)))
	}
	span.End(err)
	return doc, next, err
}

// logOperation writes the line of an operation run in this process
// (info, an error's class beside it), in the operation's span: with
// tracing on it names the trace.
func (s *Service) logOperation(ctx context.Context, id string, start time.Time, err error) {
	attrs := []slog.Attr{slog.String("operation", id), slog.Float64("duration_seconds", time.Since(start).Seconds())}
	if err != nil {
		attrs = append(attrs, slog.String("class", string(Classify(err))), slog.String("error", err.Error()))
	}
	s.log.LogAttrs(ctx, slog.LevelInfo, "operation", attrs...)
}

// OperationByID is the operation of ops with that ID, nil if there is none.
func OperationByID(ops []Operation, id string) *Operation {
	for i := range ops {
		if ops[i].ID == id {
			return &ops[i]
		}
	}
	return nil
}

// caller is an endpoint an operation can be invoked through in this
// process: the JSON endpoints (a download or an event stream writes to
// its client as it goes, and its faces call its method).
type caller interface {
	call(ctx context.Context, s *Service, in any) (doc any, next string, err error)
}

func (e Endpoint[I, O]) call(ctx context.Context, s *Service, in any) (any, string, error) {
	i, ok := in.(*I)
	if !ok {
		return nil, "", api.Errorf(api.Internal, "an operation's input is %T, not %T", in, (*I)(nil))
	}
	out, err := e(ctx, s, i)
	if out == nil {
		return nil, "", err
	}
	if a, ok := any(out).(answer); ok {
		doc, next := a.Document()
		return doc, next, err
	}
	return out, "", err
}

// answer is an endpoint's answer holding a document: what an in-process
// call returns of it (Document), the domains' own answers too.
type answer interface {
	Document() (doc any, next string)
}

func (r *Result[T]) Document() (any, string)  { return r.Body, "" }
func (c *Created[T]) Document() (any, string) { return c.Body, "" }
func (p *Page[T]) Document() (any, string)    { return p.Body, p.Next }
func (*NoContent) Document() (any, string)    { return nil, "" }
