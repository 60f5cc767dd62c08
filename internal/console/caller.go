package console

import (
	"context"
	"io"
	"net/http"
	"net/url"

	"github.com/coffer-backup/coffer/internal/console/apicall"
)

// caller is a page's client of the API (apicall): the operations of its
// route, as the browser.
type caller struct{ c *apicall.Caller }

// apiError is an answer of the API that is not a success.
type apiError = apicall.Error

func newCaller(api http.Handler, r *http.Request, allowed []string) *caller {
	return &caller{apicall.New(api, r, allowed)}
}

func (c *caller) call(op string, params map[string]string, query url.Values, body, out any) (http.Header, error) {
	return c.c.Call(op, params, query, body, out)
}

func (c *caller) callWith(op string, params map[string]string, query url.Values, header http.Header, body, out any) (http.Header, error) {
	return c.c.CallWith(op, params, query, header, body, out)
}

func (c *caller) stream(op string, params map[string]string, query url.Values, header http.Header) (http.Header, io.ReadCloser, error) {
	return c.c.Stream(op, params, query, header)
}

func (c *caller) events(op string, params map[string]string, query url.Values, lastID string, each func(event, id string, data []byte) error) error {
	return c.c.Events(op, params, query, lastID, each)
}

func (c *caller) detached(ctx context.Context) *caller { return &caller{c.c.Detached(ctx)} }
