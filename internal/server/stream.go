package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/danielgtaylor/huma/v2"
	"github.com/danielgtaylor/huma/v2/adapters/humago"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/service"
)

// lazyWriter sends an answer's headers with its first byte: until then,
// an error can still be answered as a problem.
type lazyWriter struct {
	w       http.ResponseWriter
	begin   func()
	started bool
}

func (l *lazyWriter) Write(b []byte) (int, error) {
	if !l.started {
		l.started = true
		l.begin()
	}
	return l.w.Write(b)
}

// stream answers with a file an operation writes as it goes (a zip or tar
// archive of files from a backup point). An error before the first byte
// is an ordinary problem answer. A partial error (skipped entries) comes
// after a whole file: it is sent in the Coffer-Error-Class and
// Coffer-Error trailers. Any other error halfway aborts the transfer, so
// no client takes a truncated file for a complete one.
func (s *Server) stream(hc huma.Context, contentType, filename string, write func(io.Writer) error) {
	r, w := humago.Unwrap(hc)
	rec := recordOf(r.Context())
	lw := &lazyWriter{w: w, begin: func() {
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filename}))
		w.Header().Set("Trailer", api.ErrorClassHeader+", "+api.ErrorHeader)
		w.WriteHeader(http.StatusOK)
	}}
	err := write(lw)
	if err == nil {
		if !lw.started {
			lw.begin()
		}
		return
	}
	rec.class = service.Classify(err)
	if !lw.started {
		if rec.class == api.Internal {
			rec.err = err.Error()
		}
		writeProblem(w, err)
		return
	}
	w.Header().Set(api.ErrorClassHeader, string(rec.class))
	w.Header().Set(api.ErrorHeader, api.EscapeHeader(err.Error()))
	if rec.class == api.Partial {
		return
	}
	rec.err = err.Error()
	s.log.Warn("download ended halfway", "path", r.URL.Path, "err", err)
	panic(http.ErrAbortHandler)
}

// heartbeatEvery keeps an event stream's connection alive through
// proxies that close idle ones.
const heartbeatEvery = 15 * time.Second

// events answers with server-sent events. Nothing is sent before the
// first event, so a refusal (an unknown job) is an ordinary problem
// answer; after it, comments keep the connection alive until run returns.
func (s *Server) events(hc huma.Context, run func(int64, func(string, int64, any) error) error) {
	r, w := humago.Unwrap(hc)
	rec := recordOf(r.Context())
	last, _ := strconv.ParseInt(r.Header.Get("Last-Event-ID"), 10, 64)
	rc := http.NewResponseController(w)
	var mu sync.Mutex
	started := false
	stop := make(chan struct{})
	var beats sync.WaitGroup
	begin := func() {
		started = true
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		w.WriteHeader(http.StatusOK)
		beats.Add(1)
		go func() {
			defer beats.Done()
			t := time.NewTicker(heartbeatEvery)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					mu.Lock()
					_, _ = io.WriteString(w, ": keep-alive\n\n")
					_ = rc.Flush()
					mu.Unlock()
				}
			}
		}()
	}
	send := func(event string, id int64, data any) error {
		b, err := json.Marshal(data)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if !started {
			begin()
		}
		var msg strings.Builder
		msg.WriteString("event: " + event + "\n")
		if id > 0 {
			msg.WriteString("id: " + strconv.FormatInt(id, 10) + "\n")
		}
		msg.WriteString("data: " + string(b) + "\n\n")
		if _, err := io.WriteString(w, msg.String()); err != nil {
			return err
		}
		return rc.Flush()
	}
	err := run(last, send)
	close(stop)
	beats.Wait()
	if err == nil || errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		return // the job ended, or the client left
	}
	rec.class = service.Classify(err)
	if !started {
		writeProblem(w, err)
		return
	}
	s.log.Warn("event stream ended", "path", r.URL.Path, "err", err) // the client reconnects with Last-Event-ID
}
