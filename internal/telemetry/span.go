package telemetry

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// scope names the spans' instrumentation: coffer itself.
const scope = "github.com/coffer-backup/coffer"

// Span is a traced piece of work; End it once.
type Span struct{ span trace.Span }

// Operation starts the span of an operation (its ID names the span: a
// backup is "backup-vm", a restore "restore-disk"), in this process
// (kind internal) or as the command line's call of it through a server
// (client, which Inject passes on to the server).
func Operation(ctx context.Context, id string, client bool) (context.Context, Span) {
	kind := trace.SpanKindInternal
	if client {
		kind = trace.SpanKindClient
	}
	ctx, s := otel.Tracer(scope).Start(ctx, id, trace.WithSpanKind(kind),
		trace.WithAttributes(attribute.String("coffer.operation", id)))
	return ctx, Span{s}
}

// Request starts the span of a request the API serves, a child of the
// caller's span when the request carries its traceparent. The span is
// named when it ends (Span.Name): the operation is known only once the
// request is routed.
func Request(r *http.Request) (context.Context, Span) {
	ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, s := otel.Tracer(scope).Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
	return ctx, Span{s}
}

// Inject writes the context's span into an outgoing request's headers
// (W3C traceparent), so that the server's spans join the caller's trace.
func Inject(ctx context.Context, h http.Header) {
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
}

// Name renames the span (a request's, once its operation is known).
func (s Span) Name(name string) { s.span.SetName(name) }

// Set adds string attributes, by pairs of key and value; empty values
// are left out.
func (s Span) Set(kv ...string) {
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			s.span.SetAttributes(attribute.String(kv[i], kv[i+1]))
		}
	}
}

// SetInt adds an integer attribute.
func (s Span) SetInt(key string, v int) { s.span.SetAttributes(attribute.Int(key, v)) }

// End ends the span, failed when err is not nil (its class, when the
// caller knows it, is an attribute: Set("coffer.error_class", ...)).
func (s Span) End(err error) {
	if err != nil {
		s.span.RecordError(err)
		s.span.SetStatus(codes.Error, err.Error())
	}
	s.span.End()
}

// Fail marks the span failed without an error value (a request answered
// with a server error).
func (s Span) Fail(description string) { s.span.SetStatus(codes.Error, description) }
