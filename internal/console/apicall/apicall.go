// Package apicall is the web console's client of the REST API, in
// process: it sends a page's requests to the server's own /api/v1
// handler as the browser's (its cookie and remote address), so the
// server's guard authenticates, checks and audits them as it does every
// request, and it refuses an operation the page's route did not declare.
package apicall

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
)

// Caller sends a page's requests to the API in process, as the browser's
// own: with its cookie and remote address, so the server's guard
// authenticates, checks and audits them as it does every request.
type Caller struct {
	api     http.Handler
	r       *http.Request
	allowed []string
}

// New is the caller of a page's request r, which may call the
// operations allowed (its route's) of the API api.
func New(api http.Handler, r *http.Request, allowed []string) *Caller {
	return &Caller{api: api, r: r, allowed: allowed}
}

// Error is an answer of the API that is not a success: its problem
// document's status, class and message.
type Error struct {
	Status int
	Class  api.Class
	Detail string
}

func (e *Error) Error() string { return e.Detail }

// Denied reports a refusal for want of a privilege.
func (e *Error) Denied() bool { return e.Class == api.Denied }

// Call is one operation: params fill its path, query its query string,
// body (when not nil) is sent as JSON, and the answer's document is
// decoded into out (when not nil). The answer's headers come back (a
// sign-in's cookie). A document that comes with an error (a partial
// result) is decoded and the error returned with it.
func (c *Caller) Call(op string, params map[string]string, query url.Values, body, out any) (http.Header, error) {
	return c.CallWith(op, params, query, nil, body, out)
}

// CallWith is Call with headers of the operation's input (If-Match).
func (c *Caller) CallWith(op string, params map[string]string, query url.Values, header http.Header, body, out any) (http.Header, error) {
	req, err := c.request(op, params, query, body)
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	rec := &recorder{header: http.Header{}}
	c.api.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rec.status >= 400 {
		return rec.header, problemOf(rec.status, rec.body.Bytes())
	}
	if out != nil && rec.body.Len() > 0 {
		if err := json.Unmarshal(rec.body.Bytes(), out); err != nil {
			return rec.header, fmt.Errorf("%s answered a document the console cannot read: %w", op, err)
		}
	}
	if class := rec.header.Get(api.ErrorClassHeader); class != "" {
		msg, _ := url.PathUnescape(rec.header.Get(api.ErrorHeader))
		return rec.header, &Error{Status: rec.status, Class: api.Class(class), Detail: msg}
	}
	return rec.header, nil
}

// request builds the request of an operation the page declared.
func (c *Caller) request(op string, params map[string]string, query url.Values, body any) (*http.Request, error) {
	if !declares(c.allowed, op) {
		// A bug in the console, not the caller's: every route names the
		// operations it calls (pages.go), and a test holds them to the
		// table.
		return nil, fmt.Errorf("console: the page calls %s, which its route does not declare", op)
	}
	o, ok := api.RouteOf(op)
	if !ok {
		return nil, fmt.Errorf("console: no operation %s", op)
	}
	path := o.Path
	for k, v := range params {
		path = strings.ReplaceAll(path, "{"+k+"}", url.PathEscape(v))
	}
	if strings.Contains(path, "{") {
		return nil, fmt.Errorf("console: %s needs the parameters of %s", op, o.Path)
	}
	target := api.Prefix + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(c.r.Context(), o.Method, target, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.RemoteAddr = c.r.RemoteAddr
	req.Host = c.r.Host
	if ck := c.r.Header.Get("Cookie"); ck != "" {
		req.Header.Set("Cookie", ck)
	}
	return req, nil
}

// Stream calls an operation whose answer is streamed (a download, an
// event stream): the answer's headers and its body as it is written. An
// error answer is returned as the error. Closing body stops the API's
// writes (the page's client left).
func (c *Caller) Stream(op string, params map[string]string, query url.Values, header http.Header) (http.Header, io.ReadCloser, error) {
	req, err := c.request(op, params, query, nil)
	if err != nil {
		return nil, nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	ctx, cancel := context.WithCancel(req.Context())
	req = req.WithContext(ctx)
	pr, pw := io.Pipe()
	sw := &streamWriter{header: http.Header{}, pw: pw, started: make(chan struct{})}
	go func() {
		defer func() {
			// A download the API ends halfway (http.ErrAbortHandler) or
			// a panic must not end the process: the reader gets an
			// error instead of a body that looks complete.
			if v := recover(); v != nil {
				_ = pw.CloseWithError(fmt.Errorf("%s ended halfway: %v", op, v))
			}
			sw.start()
			_ = pw.Close()
		}()
		c.api.ServeHTTP(sw, req)
	}()
	<-sw.started
	body := &streamBody{PipeReader: pr, cancel: cancel}
	if sw.status >= 400 {
		defer func() { _ = body.Close() }() // the error is in hand; this only stops the handler
		b, _ := io.ReadAll(io.LimitReader(pr, 1<<20))
		return sw.header, nil, problemOf(sw.status, b)
	}
	return sw.header, body, nil
}

// streamBody is a streamed answer's body: closing it cancels the call.
type streamBody struct {
	*io.PipeReader
	cancel context.CancelFunc
}

func (b *streamBody) Close() error {
	b.cancel()
	return b.PipeReader.CloseWithError(io.ErrClosedPipe)
}

// Events calls an operation that answers with server-sent events and
// hands each event to each until the stream ends, the request's context
// is done, or each fails.
func (c *Caller) Events(op string, params map[string]string, query url.Values, lastID string, each func(event, id string, data []byte) error) error {
	h := http.Header{}
	if lastID != "" {
		h.Set("Last-Event-ID", lastID)
	}
	_, body, err := c.Stream(op, params, query, h)
	if err != nil {
		return err
	}
	defer body.Close()
	sc := bufio.NewScanner(body)
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

// problemOf reads a problem document.
func problemOf(status int, b []byte) *Error {
	var p struct {
		Title  string    `json:"title"`
		Detail string    `json:"detail"`
		Class  api.Class `json:"class"`
	}
	_ = json.Unmarshal(b, &p)
	e := &Error{Status: status, Class: p.Class, Detail: p.Detail}
	if e.Detail == "" {
		e.Detail = p.Title
	}
	if e.Detail == "" {
		e.Detail = http.StatusText(status)
	}
	return e
}

func declares(ops []string, op string) bool {
	for _, o := range ops {
		if o == op {
			return true
		}
	}
	return false
}

// recorder keeps an in-process answer.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.body.Write(b)
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

// Detached is the caller for an operation that outlives the browser's
// request (a restore the browser follows on its task page): the same
// cookie, address and declared operations, under ctx.
func (c *Caller) Detached(ctx context.Context) *Caller {
	return &Caller{api: c.api, r: c.r.WithContext(ctx), allowed: c.allowed}
}
