package telemetry

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
)

// TestBadEndpointsAreRefused: an endpoint that is not an http(s) address
// is a configuration error, named; an empty one leaves tracing off.
func TestBadEndpointsAreRefused(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, bad := range []string{"127.0.0.1:4318", "grpc://127.0.0.1:4317", "http://", "::"} {
		if _, err := Start(bad, "v0", log); err == nil || !strings.Contains(err.Error(), "tracing.otlp-endpoint") {
			t.Errorf("endpoint %q: %v, want an error naming tracing.otlp-endpoint", bad, err)
		}
	}
	stop, err := Start("", "v0", log)
	if err != nil || stop() != nil {
		t.Fatalf("no endpoint: %v", err)
	}
	ctx, span := Operation(context.Background(), "list-points", false)
	span.End(nil)
	var b bytes.Buffer
	slog.New(LogHandler(slog.NewJSONHandler(&b, nil))).InfoContext(ctx, "operation")
	if strings.Contains(b.String(), "trace_id") {
		t.Errorf("with tracing off, a log line in an operation's context has a trace ID: %s", b.String())
	}
}

// TestUnreachableCollectorFailsNothing: spans for a collector nobody
// listens at are dropped; the process's end is not an error, and the
// failure to send them is logged as a warning.
func TestUnreachableCollectorFailsNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + ln.Addr().String()
	_ = ln.Close() // nobody listens there now
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	stop, err := Start(endpoint, "v0", log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, span := Operation(context.Background(), "backup-disk", false)
	var line bytes.Buffer
	slog.New(LogHandler(slog.NewJSONHandler(&line, nil))).InfoContext(ctx, "operation")
	span.End(nil)
	if !strings.Contains(line.String(), `"trace_id":"`) || !strings.Contains(line.String(), `"span_id":"`) {
		t.Errorf("a log line in a traced operation: %s, want trace_id and span_id", line.String())
	}
	if err := stop(); err != nil {
		t.Errorf("stopping with an unreachable collector: %v", err)
	}
	if !strings.Contains(logs.String(), "level=WARN msg=\"sending traces failed\"") {
		t.Errorf("the failed export is not logged as a warning: %q", logs.String())
	}
}
