package servercmd_test

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/version"
)

// TestTracesReachTheCollector: coffer processes with
// tracing.otlp-endpoint set send their spans over OTLP/HTTP to a
// collector (collector_test.go): a backup and a restore run here, each a
// span named by its operation, and a request through a server, whose
// server span is a child of the command line's client span. Their log
// lines name the same trace. Without the setting nothing is sent and no
// log line carries a trace ID.
func TestTracesReachTheCollector(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	img := e.Image("a.img", 4<<20, 2)
	c := startCollector(t)
	traced := []string{"COFFER_OTLP_ENDPOINT=" + c.URL, "COFFER_LOG_FORMAT=json", "COFFER_LOG_LEVEL=info"}

	// Off by default.
	_, logs := runChild(t, e, traced[1:], "backup", "disk", img, "--name", "off", "--json")
	if line := logLine(t, logs, "operation", "backup-disk"); line == nil || line["trace_id"] != nil {
		t.Errorf("without tracing.otlp-endpoint, the backup's log line is %v: want one without trace_id", line)
	}
	if n := len(c.Spans()); n != 0 {
		t.Fatalf("without tracing.otlp-endpoint, the collector received %d spans", n)
	}

	out, logs := runChild(t, e, traced, "backup", "disk", img, "--name", "a", "--json")
	point := clitest.Decode[api.BackupPoint](t, out)
	backup := tracedOperation(t, c, logs, "backup-disk", tracepb.Span_SPAN_KIND_INTERNAL)
	restored := filepath.Join(e.Dir, "restored.img")
	_, logs = runChild(t, e, traced, "restore", point.ID, "--disk", "0", "--to", restored)
	restore := tracedOperation(t, c, logs, "restore-disk", tracepb.Span_SPAN_KIND_INTERNAL)
	if !clitest.SameFile(t, img, restored) {
		t.Error("the traced restore's disk differs from the image backed up")
	}
	if bytes.Equal(backup.TraceId, restore.TraceId) {
		t.Error("the backup and the restore, two commands, share a trace")
	}
	failedRestore(t, e, c, traced)

	apiRequest(t, e, c, traced)
	for _, r := range c.Resources() {
		if r["service.name"] != "coffer" || r["service.version"] != version.Get().Version {
			t.Errorf("spans sent with the resource %v, want service.name coffer, service.version %s", r, version.Get().Version)
		}
	}
}

// apiRequest: the command line's call through a server is a client span;
// the server's span of the request is its child, in its trace, and so is
// the server's log line of the request.
func apiRequest(t *testing.T, e *clitest.Env, c *collector, traced []string) {
	e.Config(`
connections:
  - {name: lab, kind: fake, options: {seed: 3, vms: 1, hosts: 1, datastores: 1, disk-size: 128KiB}}
policies:
  - {name: web, connection: lab}
`)
	for _, kv := range traced {
		k, v, _ := strings.Cut(kv, "=")
		e.Vars[k] = v
	}
	s := e.StartServer()
	for _, kv := range traced {
		k, _, _ := strings.Cut(kv, "=")
		delete(e.Vars, k)
	}
	token := e.AdminToken()
	remote := append([]string{"COFFER_SERVER=" + s.URL, "COFFER_TOKEN=" + token, "COFFER_SERVER_FINGERPRINT=" + s.Fingerprint,
		"COFFER_REPO=", "COFFER_PASSWORD=", "COFFER_CATALOG="}, traced...)
	out, _ := runChild(t, e, remote, "snapshots", "--json")
	if points := clitest.Decode[[]api.BackupPoint](t, out); len(points) != 2 {
		t.Errorf("through the server, snapshots lists %d points, want 2", len(points))
	}
	var started api.Job
	if code, _ := s.Call(token, "POST", "/policies/web/run", nil, &started); code != 200 {
		t.Fatalf("a policy run not waited for: %d %+v", code, started)
	}
	if err := s.Stop(); err != nil { // it drains the run, and sends its last spans
		t.Errorf("the server stopped with %v\n%s", err, s.Log())
	}
	client := c.Span(t, "list-points")
	server := c.Span(t, "GET list-points")
	if client.Kind != tracepb.Span_SPAN_KIND_CLIENT || server.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("the call's span is of kind %v, the request's %v: want client and server", client.Kind, server.Kind)
	}
	if !bytes.Equal(server.TraceId, client.TraceId) || !bytes.Equal(server.ParentSpanId, client.SpanId) {
		t.Errorf("the server's span (trace %x, parent %x) is not the child of the command line's (trace %x, span %x)",
			server.TraceId, server.ParentSpanId, client.TraceId, client.SpanId)
	}
	if code := attribute(server, "http.response.status_code"); code != "200" {
		t.Errorf("the request's span says status %q, want 200", code)
	}
	policyRun(t, c, started)
	line := logLine(t, s.Log(), "request", "list-points")
	if line == nil || line["trace_id"] != hex.EncodeToString(server.TraceId) || line["span_id"] != hex.EncodeToString(server.SpanId) {
		t.Errorf("the server's log line of the request is %v: want trace_id %x and span_id %x", line, server.TraceId, server.SpanId)
	}
}

// failedRestore: a restore of a point that does not exist is a span that
// failed, with the error's class, which its log line names too.
func failedRestore(t *testing.T, e *clitest.Env, c *collector, traced []string) {
	cmd := e.Child("restore", "0123456789ab", "--disk", "0", "--to", filepath.Join(e.Dir, "none.img"))
	cmd.Env = append(cmd.Env, traced...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err == nil {
		t.Fatal("a restore of a point that does not exist succeeded")
	}
	line := logLine(t, stderr.String(), "operation", "restore-disk")
	var failed *tracepb.Span
	for _, s := range c.Named("restore-disk") {
		if line != nil && hex.EncodeToString(s.TraceId) == line["trace_id"] {
			failed = s
		}
	}
	if failed == nil || line["class"] == nil {
		t.Fatalf("no span of the failed restore, or its log line %v names no trace or class\n%s", line, stderr.String())
	}
	if failed.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || attribute(failed, "coffer.error_class") != line["class"] {
		t.Errorf("the failed restore's span has status %v and class %q, want an error of class %v",
			failed.Status, attribute(failed, "coffer.error_class"), line["class"])
	}
}

// policyRun: a policy's run that goes on after the request's answer is a
// span of its own, a child of the request's, that names the job and
// its outcome (known only once it ended).
func policyRun(t *testing.T, c *collector, started api.Job) {
	request := c.Span(t, "POST backup-policy")
	run := c.Span(t, "backup-policy (background)")
	if !bytes.Equal(run.TraceId, request.TraceId) || !bytes.Equal(run.ParentSpanId, request.SpanId) {
		t.Errorf("the policy's run (trace %x, parent %x) is not the child of its request's span (trace %x, span %x)",
			run.TraceId, run.ParentSpanId, request.TraceId, request.SpanId)
	}
	if attribute(run, "coffer.policy") != "web" || attribute(run, "coffer.job") != strconv.FormatInt(started.ID, 10) ||
		attribute(run, "coffer.job_status") != "success" || run.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("the policy run's span: %v, status %v: want policy web, job %d, success", run.Attributes, run.Status, started.ID)
	}
}

// tracedOperation checks that the collector received the span of an
// operation, which ended well, and that the command's log line of it
// names its trace and span.
func tracedOperation(t *testing.T, c *collector, logs, op string, kind tracepb.Span_SpanKind) *tracepb.Span {
	t.Helper()
	span := c.Span(t, op)
	if span.Kind != kind || span.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR || len(span.ParentSpanId) != 0 {
		t.Errorf("the span of %s: kind %v, status %v, parent %x: want a root span of kind %v that did not fail",
			op, span.Kind, span.Status, span.ParentSpanId, kind)
	}
	if span.EndTimeUnixNano <= span.StartTimeUnixNano {
		t.Errorf("the span of %s ends at %d, not after its start %d", op, span.EndTimeUnixNano, span.StartTimeUnixNano)
	}
	line := logLine(t, logs, "operation", op)
	if line == nil || line["trace_id"] != hex.EncodeToString(span.TraceId) || line["span_id"] != hex.EncodeToString(span.SpanId) {
		t.Errorf("the log line of %s is %v: want trace_id %x and span_id %x", op, line, span.TraceId, span.SpanId)
	}
	return span
}

// runChild runs coffer as a process of its own with more variables, and
// returns its stdout and stderr (its log).
func runChild(t *testing.T, e *clitest.Env, vars []string, args ...string) (string, string) {
	t.Helper()
	cmd := e.Child(args...)
	cmd.Env = append(cmd.Env, vars...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("coffer %v: %v\n%s%s", args, err, out, stderr.String())
	}
	return string(out), stderr.String()
}

// logLine is the first JSON log line with that message and operation,
// nil if there is none.
func logLine(t *testing.T, logs, msg, op string) map[string]any {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(logs))
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue // not a log line (the server's banner)
		}
		if line["msg"] == msg && line["operation"] == op {
			return line
		}
	}
	return nil
}
