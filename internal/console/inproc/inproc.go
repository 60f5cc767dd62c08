// Package inproc serves HTTP requests in process, for the console calling
// its own API: an answer kept whole (Recorder), an answer streamed through
// a pipe as the handler writes it (Stream), and server-sent events read
// back from a stream (ReadEvents).
package inproc

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Recorder keeps an answer whole.
type Recorder struct {
	header http.Header
	Status int
	Body   bytes.Buffer
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{header: http.Header{}} }

func (r *Recorder) Header() http.Header { return r.header }

func (r *Recorder) WriteHeader(code int) {
	if r.Status == 0 {
		r.Status = code
	}
}

func (r *Recorder) Write(b []byte) (int, error) {
	if r.Status == 0 {
		r.Status = http.StatusOK
	}
	return r.Body.Write(b)
}

// Body is a streamed answer's body: closing it cancels the request.
type Body struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b *Body) Close() error {
	b.cancel()
	return b.PipeReader.CloseWithError(io.ErrClosedPipe)
}

// Stream serves req with h and returns the answer's header and status
// once the handler has begun to answer, and its body as it is written.
// Closing the body cancels req (the page's client left). A handler that
// ends halfway (http.ErrAbortHandler) or panics does not end the process:
// the body's reader gets an error instead of a body that looks complete.
func Stream(h http.Handler, req *http.Request, name string) (http.Header, int, *Body) {
	ctx, cancel := context.WithCancel(req.Context())
	req = req.WithContext(ctx)
	pr, pw := io.Pipe()
	sw := &streamWriter{header: http.Header{}, pw: pw, started: make(chan struct{})}
	go func() {
		defer func() {
			if v := recover(); v != nil {
				_ = pw.CloseWithError(fmt.Errorf("%s ended halfway: %v", name, v))
			}
			sw.start()
			_ = pw.Close()
		}()
		h.ServeHTTP(sw, req)
	}()
	<-sw.started
	return sw.header, sw.status, &Body{PipeReader: pr, cancel: cancel}
}

// streamWriter passes a streamed answer through a pipe as it is written.
type streamWriter struct {
	header  http.Header
	status  int
	pw      *io.PipeWriter
	started chan struct{}
	once    bool
}

func (s *streamWriter) start() {
	if !s.once {
		s.once = true
		if s.status == 0 {
			s.status = http.StatusOK
		}
		close(s.started)
	}
}

func (s *streamWriter) Header() http.Header { return s.header }
func (s *streamWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.start()
}
func (s *streamWriter) Write(b []byte) (int, error) {
	s.start()
	return s.pw.Write(b)
}

// Flush is what http.ResponseController asks for: the pipe passes every
// write at once.
func (s *streamWriter) Flush() {}

// ReadEvents reads server-sent events from r and hands each to each until
// r ends or each fails.
func ReadEvents(r io.Reader, each func(event, id string, data []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var event, id string
	var data bytes.Buffer
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data.Len() > 0 {
				if err := each(event, id, data.Bytes()); err != nil {
					return err
				}
			}
			event, id = "", ""
			data.Reset()
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			data.WriteString(strings.TrimPrefix(line, "data: "))
		}
	}
	return sc.Err()
}
