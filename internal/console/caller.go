package console

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/console/inproc"
)

// caller sends a page's requests to the API in process, as the browser's
// own: with its cookie and remote address, so the server's guard
// authenticates, checks and audits them as it does every request.
type caller struct {
	api     http.Handler
	r       *http.Request
	allowed []string
}

// apiError is an answer of the API that is not a success: its problem
// document's status, class and message.
type apiError struct {
	Status int
	Class  api.Class
	Detail string
}

func (e *apiError) Error() string { return e.Detail }

// denied reports a refusal for want of a privilege.
func (e *apiError) denied() bool { return e.Class == api.Denied }

// call is one operation: params fill its path, query its query string,
// body (when not nil) is sent as JSON, and the answer's document is
// decoded into out (when not nil). The answer's headers come back (a
// sign-in's cookie). A document that comes with an error (a partial
// result) is decoded and the error returned with it.
func (c *caller) call(op string, params map[string]string, query url.Values, body, out any) (http.Header, error) {
	return c.callWith(op, params, query, nil, body, out)
}

// callWith is call with headers of the operation's input (If-Match).
func (c *caller) callWith(op string, params map[string]string, query url.Values, header http.Header, body, out any) (http.Header, error) {
	req, err := c.request(op, params, query, body)
	if err != nil {
		return nil, err
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	rec := inproc.NewRecorder()
	c.api.ServeHTTP(rec, req)
	if rec.Status == 0 {
		rec.Status = http.StatusOK
	}
	if rec.Status >= 400 {
		return rec.Header(), problemOf(rec.Status, rec.Body.Bytes())
	}
	if out != nil && rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			return rec.Header(), fmt.Errorf("%s answered a document the console cannot read: %w", op, err)
		}
	}
	if class := rec.Header().Get(api.ErrorClassHeader); class != "" {
		msg, _ := url.PathUnescape(rec.Header().Get(api.ErrorHeader))
		return rec.Header(), &apiError{Status: rec.Status, Class: api.Class(class), Detail: msg}
	}
	return rec.Header(), nil
}

// request builds the request of an operation the page declared.
func (c *caller) request(op string, params map[string]string, query url.Values, body any) (*http.Request, error) {
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

// stream calls an operation whose answer is streamed (a download, an
// event stream): the answer's headers and its body as it is written. An
// error answer is returned as the error. Closing body stops the API's
// writes (the page's client left).
func (c *caller) stream(op string, params map[string]string, query url.Values, header http.Header) (http.Header, io.ReadCloser, error) {
	req, err := c.request(op, params, query, nil)
	if err != nil {
		return nil, nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	h, status, body := inproc.Stream(c.api, req, op)
	if status >= 400 {
		defer func() { _ = body.Close() }() // the error is in hand; this only stops the handler
		b, _ := io.ReadAll(io.LimitReader(body, 1<<20))
		return h, nil, problemOf(status, b)
	}
	return h, body, nil
}

// events calls an operation that answers with server-sent events and
// hands each event to each until the stream ends, the request's context
// is done, or each fails.
func (c *caller) events(op string, params map[string]string, query url.Values, lastID string, each func(event, id string, data []byte) error) error {
	h := http.Header{}
	if lastID != "" {
		h.Set("Last-Event-ID", lastID)
	}
	_, body, err := c.stream(op, params, query, h)
	if err != nil {
		return err
	}
	defer body.Close()
	return inproc.ReadEvents(body, each)
}

// problemOf reads a problem document.
func problemOf(status int, b []byte) *apiError {
	var p struct {
		Title  string    `json:"title"`
		Detail string    `json:"detail"`
		Class  api.Class `json:"class"`
	}
	_ = json.Unmarshal(b, &p)
	e := &apiError{Status: status, Class: p.Class, Detail: p.Detail}
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

// detached is the caller for an operation that outlives the browser's
// request (a restore the browser follows on its task page): the same
// cookie, address and declared operations, under ctx.
func (c *caller) detached(ctx context.Context) *caller {
	return &caller{api: c.api, r: c.r.WithContext(ctx), allowed: c.allowed}
}
