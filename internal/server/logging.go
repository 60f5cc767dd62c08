package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/telemetry"
)

// request is what the log line of a request says beyond the request
// itself: filled by the guard (operation, caller, object) and the
// endpoint's error.
type request struct {
	op, user, token, object string
	class                   api.Class
	// err is an internal error's message, for the log (the answer holds
	// it too; it holds no secret: errors never do).
	err string
}

type requestKey struct{}

// recordOf is the request's record (a throwaway one outside a request).
func recordOf(ctx context.Context) *request {
	if r, ok := ctx.Value(requestKey{}).(*request); ok {
		return r
	}
	return &request{}
}

// statusWriter remembers the status and size of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the connection (flushes,
// deadlines).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// logRequests writes one line per request: method, path, operation,
// caller, status, duration, size. Never the query (it may name files, but
// never a credential: those travel in headers) and never a header.
// Each request is a span too (telemetry.Request), in the caller's trace
// when it sent its traceparent; the log line names the trace.
func (s *Server) logRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &request{}
		sw := &statusWriter{ResponseWriter: w}
		ctx, span := telemetry.Request(r)
		r = r.WithContext(context.WithValue(ctx, requestKey{}, rec))
		defer func() { // also after an aborted download
			s.logLine(r, rec, sw, start)
			endSpan(span, r, rec, sw)
		}()
		next.ServeHTTP(sw, r)
	})
}

// endSpan names a request's span by its operation (its method alone when
// no operation answered it, as OpenTelemetry's HTTP conventions do for
// an unknown route) and ends it, failed on a server error.
func endSpan(span telemetry.Span, r *http.Request, rec *request, sw *statusWriter) {
	if rec.op != "" {
		span.Name(r.Method + " " + rec.op)
	}
	span.SetInt("http.response.status_code", sw.status)
	span.Set("coffer.operation", rec.op, "coffer.error_class", string(rec.class))
	if sw.status >= 500 {
		span.Fail(http.StatusText(sw.status))
	}
	span.End(nil)
}

func (s *Server) logLine(r *http.Request, rec *request, sw *statusWriter, start time.Time) {
	{
		level := slog.LevelInfo
		if sw.status >= 500 {
			level = slog.LevelError
		}
		attrs := []slog.Attr{slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Int("status", sw.status),
			slog.Float64("duration_seconds", time.Since(start).Seconds()), slog.Int64("bytes", sw.bytes), slog.String("remote", r.RemoteAddr)}
		for _, a := range []struct{ k, v string }{{"operation", rec.op}, {"user", rec.user}, {"token", rec.token},
			{"object", rec.object}, {"class", string(rec.class)}, {"error", rec.err}} {
			if a.v != "" {
				attrs = append(attrs, slog.String(a.k, a.v))
			}
		}
		s.log.LogAttrs(r.Context(), level, "request", attrs...)
	}
}

// recoverPanics answers a panic with a problem (when nothing was sent
// yet) and logs it with its stack: a panic is a bug, and the client gets
// an answer instead of a dropped connection.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw, _ := w.(*statusWriter)
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(v) // a deliberate end of the answer (a download that failed halfway)
			}
			s.log.Error("panic serving a request", "path", r.URL.Path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			recordOf(r.Context()).class = api.Internal
			if sw == nil || sw.status == 0 {
				writeProblem(w, api.Errorf(api.Internal, "internal error (logged by the server)"))
			}
		}()
		next.ServeHTTP(w, r)
	})
}
