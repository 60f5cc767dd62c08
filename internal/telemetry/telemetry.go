// Package telemetry sends OpenTelemetry traces of coffer's operations and
// of its API's requests to a collector over OTLP/HTTP, when one is
// configured (tracing.otlp-endpoint), and puts the trace's and span's IDs
// in every log line written within a traced operation or request.
//
// Tracing is off by default: without an endpoint the tracer provider
// stays OpenTelemetry's no-op one, a span costs a context lookup, and no
// log line carries an ID.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// TracesPath is where an OTLP/HTTP collector receives traces, below the
// endpoint's own path (OpenTelemetry's OTEL_EXPORTER_OTLP_ENDPOINT rule).
const TracesPath = "v1/traces"

// flushPatience bounds what Stop waits for the collector: a command
// that ends does not hang on a collector that is down.
const flushPatience = 3 * time.Second

// Stop sends the spans still buffered and stops the exporter.
type Stop func() error

// Start sets the process's tracer provider up to export to endpoint (the
// collector's base URL, http://host:4318), the resource named "coffer"
// at version. An empty endpoint leaves tracing off. Errors of the
// exporter (a collector that is down) are logged to log, at most as
// warnings: traces never fail an operation.
func Start(endpoint, version string, log *slog.Logger) (Stop, error) {
	if endpoint == "" {
		return func() error { return nil }, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("tracing.otlp-endpoint %q: want the collector's OTLP/HTTP address, http://host:4318", endpoint)
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/" + TracesPath
	exporter, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(u.String()))
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "coffer"), attribute.String("service.version", version))
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(res))
	otel.SetLogger(logr.FromSlogHandler(log.Handler()))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("sending traces failed", "endpoint", endpoint, "err", err)
	}))
	otel.SetTracerProvider(provider)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), flushPatience)
		defer cancel()
		if err := provider.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("tracing: %w", err)
		}
		return nil
	}, nil
}
