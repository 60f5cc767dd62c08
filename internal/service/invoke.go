package service

import (
	"context"
	"fmt"

	"github.com/coffer-backup/coffer/internal/api"
)

// Invoke runs an operation by its ID in this process, with the input the
// server would decode from a request (a pointer to the operation's input
// type, its defaults applied as the server applies them), and returns its
// document: the command line calls its operations this way when no server
// is configured, and through the server (internal/apiclient) with the
// very same input when one is. The access checks of the operation table
// are the server's: a process that invokes directly has the repository
// and the catalog at hand anyway (Config.Local).
func Invoke(ctx context.Context, s *Service, id string, in any) (any, error) {
	doc, _, err := InvokePage(ctx, s, id, in)
	return doc, err
}

// InvokePage is Invoke for a paged listing: it also returns the cursor of
// the next page ("" after the last).
func InvokePage(ctx context.Context, s *Service, id string, in any) (doc any, next string, err error) {
	op := OperationByID(id)
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
	return c.call(ctx, s, in)
}

// Invoke runs an operation by its ID, as Invoke does: the schedules call
// the operations they run so.
func (s *Service) Invoke(ctx context.Context, id string, in any) (any, error) {
	return Invoke(ctx, s, id, in)
}

// OperationByID is the operation with that ID, nil if there is none.
func OperationByID(id string) *Operation {
	for i := range Operations {
		if Operations[i].ID == id {
			return &Operations[i]
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
		doc, next := a.document()
		return doc, next, err
	}
	return out, "", err
}

// answer is an endpoint's answer holding a document: what an in-process
// call returns of it.
type answer interface {
	document() (doc any, next string)
}

func (r *Result[T]) document() (any, string)           { return r.Body, "" }
func (c *Created[T]) document() (any, string)          { return c.Body, "" }
func (p *Page[T]) document() (any, string)             { return p.Body, p.Next }
func (*NoContent) document() (any, string)             { return nil, "" }
func (d *JobDetail) document() (any, string)           { return d.Body, d.Next }
func (p *VMsPage) document() (any, string)             { return p.Body, p.Next }
func (a *ConfigObjectAnswer) document() (any, string)  { return a.Body, "" }
func (c *ConfigObjectCreated) document() (any, string) { return c.Body, "" }
