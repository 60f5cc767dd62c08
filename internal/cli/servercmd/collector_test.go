package servercmd_test

import (
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// collector receives traces as an OpenTelemetry collector's OTLP/HTTP
// receiver does: ExportTraceServiceRequest messages, protobuf-encoded
// (gzip or not), POSTed to /v1/traces, each answered with an
// ExportTraceServiceResponse. It keeps the spans and their resources'
// attributes; anything else it is sent fails the test.
type collector struct {
	URL       string
	t         *testing.T
	mu        sync.Mutex
	spans     []*tracepb.Span
	resources []map[string]string
}

func startCollector(t *testing.T) *collector {
	c := &collector{t: t}
	srv := httptest.NewServer(http.HandlerFunc(c.receive))
	t.Cleanup(srv.Close)
	c.URL = srv.URL
	return c
}

func (c *collector) receive(w http.ResponseWriter, r *http.Request) {
	req, err := decodeExport(r)
	if err != nil {
		c.t.Errorf("the collector was sent %s %s (%s): %v", r.Method, r.URL.Path, r.Header.Get("Content-Type"), err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c.mu.Lock()
	for _, rs := range req.ResourceSpans {
		c.resources = append(c.resources, attributes(rs.GetResource().GetAttributes()))
		for _, ss := range rs.ScopeSpans {
			c.spans = append(c.spans, ss.Spans...)
		}
	}
	c.mu.Unlock()
	answer, err := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	if err != nil {
		c.t.Error(err)
		return
	}
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(answer)
}

func decodeExport(r *http.Request) (*coltracepb.ExportTraceServiceRequest, error) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
		return nil, fmt.Errorf("not an OTLP/HTTP export of traces")
	}
	body := io.Reader(r.Body)
	if r.Header.Get("Content-Encoding") == "gzip" {
		z, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, err
		}
		body = z
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, err
	}
	req := &coltracepb.ExportTraceServiceRequest{}
	return req, proto.Unmarshal(b, req)
}

// Spans are the spans received so far.
func (c *collector) Spans() []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*tracepb.Span(nil), c.spans...)
}

// Resources are the resources' attributes of every export received.
func (c *collector) Resources() []map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]map[string]string(nil), c.resources...)
}

// Named are the spans received with that name.
func (c *collector) Named(name string) []*tracepb.Span {
	var found []*tracepb.Span
	for _, s := range c.Spans() {
		if s.Name == name {
			found = append(found, s)
		}
	}
	return found
}

// Span is the one span received with that name; the test fails unless
// there is exactly one.
func (c *collector) Span(t *testing.T, name string) *tracepb.Span {
	t.Helper()
	found := c.Named(name)
	if len(found) != 1 {
		var names []string
		for _, s := range c.Spans() {
			names = append(names, s.Name)
		}
		t.Fatalf("the collector received %d spans named %q, want 1 (it has %q)", len(found), name, names)
	}
	return found[0]
}

// attribute is a span's attribute as text ("" when it has none).
func attribute(s *tracepb.Span, key string) string {
	return attributes(s.Attributes)[key]
}

func attributes(kvs []*commonpb.KeyValue) map[string]string {
	m := map[string]string{}
	for _, kv := range kvs {
		switch v := kv.Value.GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = strconv.FormatInt(v.IntValue, 10)
		default:
			m[kv.Key] = kv.Value.String()
		}
	}
	return m
}
