package server

import (
	"io"
	"mime"
	"net/http"

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
