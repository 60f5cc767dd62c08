package service

import (
	"context"
	"io"
	"net/http"
	"reflect"

	"github.com/danielgtaylor/huma/v2"

	"github.com/coffer-backup/coffer/internal/api"
)

// An operation reaches HTTP through its endpoint: a function of the
// request's parameters and body (I, as huma reads a struct's path, query
// and header fields and its Body) that calls the operation's *Service
// method and returns the answer (O: a Body document and headers).
//
// huma.Register is generic over I and O: only code that knows both types
// can call it, and that is the operation's own entry in the table. So this
// file is where internal/service meets huma, and nothing else of HTTP: the
// server decides which service answers a request, checks access before
// and turns errors into HTTP answers (Binding).

// Binding is what the server gives every endpoint it registers.
type Binding interface {
	// Service is the service that runs the request (bound to the
	// repository the request names).
	Service(ctx context.Context) (*Service, error)
	// Error turns an operation's error into the HTTP answer.
	Error(ctx context.Context, err error) error
	// Stream answers with a file the operation writes as it goes:
	// nothing is sent until write writes, so an error before that is an
	// ordinary error answer; one after it cannot be, and ends the transfer
	// so the client cannot take it for complete.
	// write's partial error (skipped entries) comes after a whole file.
	Stream(hc huma.Context, contentType, filename string, write func(io.Writer) error)
	// Events answers with server-sent events run sends: nothing is sent
	// before its first event, so an error before that is an ordinary
	// error answer. The client's Last-Event-ID is passed to run.
	Events(hc huma.Context, run func(lastEventID int64, send func(event string, id int64, data any) error) error)
}

// Registrar registers an operation's endpoint with a huma API.
type Registrar interface {
	Register(api huma.API, op huma.Operation, b Binding)
	// Input is the request's type: its parameters and body.
	Input() reflect.Type
}

// Endpoint is an operation's JSON endpoint.
type Endpoint[I, O any] func(ctx context.Context, s *Service, in *I) (*O, error)

// Register implements Registrar. An operation that returns its document
// together with an error (a partial failure, damage a verify found, a job
// where some VMs failed) answers 200 with the document, and the error's
// class and message in the Coffer-Error-Class and Coffer-Error headers:
// the document describes what went wrong.
func (e Endpoint[I, O]) Register(api huma.API, op huma.Operation, b Binding) {
	var zero O
	if st, ok := any(&zero).(interface{ Status() int }); ok {
		op.DefaultStatus = st.Status()
	}
	huma.Register(api, op, func(ctx context.Context, in *I) (*O, error) {
		s, err := b.Service(ctx)
		if err != nil {
			return nil, b.Error(ctx, err)
		}
		out, err := e(ctx, s, in)
		if err == nil {
			return out, nil
		}
		if r, ok := any(out).(interface{ SetError(error) }); ok && out != nil {
			r.SetError(err)
			return out, nil
		}
		return nil, b.Error(ctx, err)
	})
}

// Input implements Registrar.
func (e Endpoint[I, O]) Input() reflect.Type { return reflect.TypeFor[I]() }

// Result is the answer of an endpoint: its document, and the error that
// came with it (see Endpoint.Register).
type Result[T any] struct {
	Body       T
	ErrorClass string `header:"Coffer-Error-Class" doc:"The class of the error the document describes (partial, integrity, ...); absent when the operation succeeded."`
	Error      string `header:"Coffer-Error" doc:"The message of that error, percent-encoded UTF-8."`
}

func (r *Result[T]) SetError(err error) {
	r.ErrorClass, r.Error = string(Classify(err)), api.EscapeHeader(err.Error())
}

// result wraps a document and its error for an endpoint.
func result[T any](doc T, err error) (*Result[T], error) {
	if err != nil && !hasDoc(doc) {
		return nil, err
	}
	return &Result[T]{Body: doc}, err
}

// hasDoc reports a document worth answering with beside an error: not
// a nil pointer, nor an empty list of what was done.
func hasDoc(doc any) bool {
	v := reflect.ValueOf(doc)
	switch v.Kind() {
	case reflect.Invalid:
		return false
	case reflect.Pointer, reflect.Interface:
		return !v.IsNil()
	case reflect.Slice, reflect.Map:
		return v.Len() > 0
	}
	return true
}

// Page is the answer of a paged listing: a page of items and, when more
// may follow, the cursor of the next page (api.NextHeader).
type Page[T any] struct {
	Body []T
	Next string `header:"Coffer-Next" doc:"present when more items may follow: pass it as the after parameter for the next page"`
}

// Created is the answer of an endpoint that created something: 201.
type Created[T any] struct{ Body T }

func (*Created[T]) Status() int { return http.StatusCreated }

func NewCreated[T any](doc T) *Created[T] { return &Created[T]{Body: doc} }

// NoContent is the answer of an endpoint with nothing to say: 204.
type NoContent struct{}

func (*NoContent) Status() int { return http.StatusNoContent }

func noContent() *NoContent { return &NoContent{} }

// Download is an operation's endpoint that answers with a file (a zip or
// tar archive of files from a backup point): write writes it and returns
// the operation's document and error; the document is not sent (the
// answer is the file), its error is.
type Download[I any] struct {
	// Types are the content types it answers with; File names the file
	// (content type and name) of a request.
	Types []string
	File  func(in *I) (contentType, filename string)
	Run   func(ctx context.Context, s *Service, in *I, w io.Writer) error
}

// Input implements Registrar.
func (d Download[I]) Input() reflect.Type { return reflect.TypeFor[I]() }

// Register implements Registrar.
func (d Download[I]) Register(api huma.API, op huma.Operation, b Binding) {
	content := map[string]*huma.MediaType{}
	for _, ct := range d.Types {
		content[ct] = &huma.MediaType{Schema: &huma.Schema{Type: "string", Format: "binary"}}
	}
	op.Responses = map[string]*huma.Response{"200": {
		Description: "the file; a partial error (entries skipped) follows it in the Coffer-Error-Class and Coffer-Error trailers",
		Content:     content,
	}}
	huma.Register(api, op, func(ctx context.Context, in *I) (*huma.StreamResponse, error) {
		s, err := b.Service(ctx)
		if err != nil {
			return nil, b.Error(ctx, err)
		}
		ct, name := d.File(in)
		return &huma.StreamResponse{Body: func(hc huma.Context) {
			b.Stream(hc, ct, name, func(w io.Writer) error { return d.Run(ctx, s, in, w) })
		}}, nil
	})
}

// Events is an operation's endpoint that answers with server-sent events
// (a job's log and changes as they happen). Run sends them until it
// returns; lastEventID is the client's Last-Event-ID (0: none), to resume
// after a reconnection.
type Events[I any] struct {
	// Data is the type of every event's data, Names the events' names
	// (for the document).
	Data  any
	Names []string
	Run   func(ctx context.Context, s *Service, in *I, lastEventID int64, send func(event string, id int64, data any) error) error
}

// Input implements Registrar.
func (e Events[I]) Input() reflect.Type { return reflect.TypeFor[I]() }

// Register implements Registrar.
func (e Events[I]) Register(api huma.API, op huma.Operation, b Binding) {
	// Documented as huma's sse package documents streams: each event an
	// object of its name, ID and data.
	doc := api.OpenAPI().Components.Schemas.Schema(reflect.TypeOf(e.Data), true, "")
	// The data field is JSON text holding the document.
	data := &huma.Schema{Type: huma.TypeString, Extensions: map[string]any{"contentMediaType": "application/json", "contentSchema": doc}}
	var events []*huma.Schema
	for _, name := range e.Names {
		events = append(events, &huma.Schema{Title: "Event " + name, Type: huma.TypeObject, Required: []string{"data", "event"},
			Properties: map[string]*huma.Schema{
				"id":    {Type: huma.TypeString, Description: "a log line's number (resume with Last-Event-ID)"},
				"event": {Type: huma.TypeString, Extensions: map[string]any{"const": name}},
				"data":  data,
				"retry": {Type: huma.TypeInteger},
			}})
	}
	op.Responses = map[string]*huma.Response{"200": {
		Description: "server-sent events: each event's data is one document, the event field names its kind",
		Content:     map[string]*huma.MediaType{"text/event-stream": {Schema: &huma.Schema{Title: "Server Sent Event", OneOf: events}}},
	}}
	huma.Register(api, op, func(ctx context.Context, in *I) (*huma.StreamResponse, error) {
		s, err := b.Service(ctx)
		if err != nil {
			return nil, b.Error(ctx, err)
		}
		return &huma.StreamResponse{Body: func(hc huma.Context) {
			b.Events(hc, func(last int64, send func(string, int64, any) error) error { return e.Run(ctx, s, in, last, send) })
		}}, nil
	})
}

// The constructors below bind an operation's method to its endpoint. The
// methods are a domain's (internal/service/*ops): each domain package
// has its own type over the kernel's Service, a struct of it alone
// (type Ops struct{ *service.Service }), so that its operations are
// methods there and its table names them by method expression
// (Ops.Verify). A method takes the operation's input as the API defines it
// (internal/api): nothing converts between two shapes of one request.

// Domain is the type of a domain package's operations: a struct of the
// kernel's Service alone, made for each call.
type Domain interface{ ~struct{ *Service } }

// Returns answers 200 with the method's document (and the error that came
// with it, as Result says).
func Returns[D Domain, I, T any](m func(D, context.Context, *I) (T, error)) Endpoint[I, Result[T]] {
	return func(ctx context.Context, s *Service, in *I) (*Result[T], error) { return result(m(D{s}, ctx, in)) }
}

// Creates answers 201 with the document of what the method created.
func Creates[D Domain, I, T any](m func(D, context.Context, *I) (T, error)) Endpoint[I, Created[T]] {
	return func(ctx context.Context, s *Service, in *I) (*Created[T], error) {
		doc, err := m(D{s}, ctx, in)
		if err != nil {
			return nil, err
		}
		return NewCreated(doc), nil
	}
}

// ReturnsNothing answers 204 when the method succeeds.
func ReturnsNothing[D Domain, I any](m func(D, context.Context, *I) error) Endpoint[I, NoContent] {
	return func(ctx context.Context, s *Service, in *I) (*NoContent, error) {
		if err := m(D{s}, ctx, in); err != nil {
			return nil, err
		}
		return noContent(), nil
	}
}

// ReturnsPage answers with a page of a listing and the cursor of the next
// page ("" after the last).
func ReturnsPage[D Domain, I, T any](m func(D, context.Context, *I) ([]T, string, error)) Endpoint[I, Page[T]] {
	return func(ctx context.Context, s *Service, in *I) (*Page[T], error) {
		items, next, err := m(D{s}, ctx, in)
		if err != nil {
			return nil, err
		}
		return &Page[T]{Body: items, Next: next}, nil
	}
}

// Answers binds a method that returns an endpoint's own answer type
// (JobDetail, VMsPage: a document with headers of its own).
func Answers[D Domain, I, O any](m func(D, context.Context, *I) (*O, error)) Endpoint[I, O] {
	return func(ctx context.Context, s *Service, in *I) (*O, error) { return m(D{s}, ctx, in) }
}
