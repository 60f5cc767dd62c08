// Package apiclient is the remote command line's client of coffer's REST
// API: it calls the server's operations by their IDs (the routes come
// from api.Routes, generated from the operation table the server
// registers), with an API token, and turns problem answers back into the
// errors the command line knows (their class decides the exit code).
//
// The server's certificate is trusted by its pinned SHA-256 fingerprint
// (what coffer server prints), by a CA file, or by the system's roots.
package apiclient

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/fingerprint"
	"github.com/coffer-backup/coffer/internal/telemetry"
)

// Config says how to reach a server.
type Config struct {
	// URL is the server: https://host:8443 (http:// only for a server on
	// a loopback address).
	URL string
	// Token is an API token (coffer_...).
	Token string
	// Fingerprint pins the server's certificate (SHA-256, as coffer
	// server prints it); CAFile trusts the CAs in a PEM file instead.
	// Neither: the system's roots.
	Fingerprint string
	CAFile      string
}

// Client calls a coffer server.
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// New returns a client for cfg.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(cfg.URL, "/"))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, api.Errorf(api.Invalid, "server URL %q is not like https://host:8443", cfg.URL)
	}
	if cfg.Token == "" {
		return nil, api.Errorf(api.Invalid, "no API token for %s: set COFFER_TOKEN or --token-file (coffer token create makes one)", u.Host)
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	switch {
	case cfg.Fingerprint != "":
		pin, err := fingerprint.Parse(cfg.Fingerprint)
		if err != nil {
			return nil, api.WithClass(api.Invalid, err)
		}
		// The pin is the trust: the chain and the name are not checked,
		// the certificate must be the one pinned.
		tc.InsecureSkipVerify = true
		tc.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			if len(raw) > 0 {
				sum := sha256.Sum256(raw[0])
				if subtle.ConstantTimeCompare(sum[:], pin) == 1 {
					return nil
				}
				return fmt.Errorf("the server's certificate has the SHA-256 fingerprint %s, not the pinned %s: "+
					"if the server's certificate was replaced, pin the new one", fingerprint.Format(raw[0]), cfg.Fingerprint)
			}
			return errors.New("the server sent no certificate")
		}
	case cfg.CAFile != "":
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, api.WithClass(api.Invalid, fmt.Errorf("server CA file: %w", err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, api.Errorf(api.Invalid, "server CA file %s holds no PEM certificate", cfg.CAFile)
		}
		tc.RootCAs = pool
	}
	tr := &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSClientConfig:     tc,
		TLSHandshakeTimeout: 30 * time.Second,
		ForceAttemptHTTP2:   true,
	}
	// No overall timeout: a restore or a verify answers when it is done.
	// Ctrl-C cancels the request, and the server cancels the operation.
	return &Client{base: u, token: cfg.Token, http: &http.Client{Transport: tr}}, nil
}

// Request is a call of one operation.
type Request struct {
	// Op is the operation's ID (api.Routes).
	Op string
	// Path fills the route's {name} parameters; Query is its query.
	Path  map[string]string
	Query url.Values
	// Body is sent as JSON (nil: no body).
	Body any
	// Header holds headers of the operation's input (If-Match).
	Header http.Header
}

func operation(id string) (api.Route, error) {
	if r, ok := api.RouteOf(id); ok {
		return r, nil
	}
	return api.Route{}, api.Errorf(api.Internal, "no operation %q", id)
}

// do sends a request and returns the answer, a problem answer already
// turned into its error.
func (c *Client) do(ctx context.Context, r Request) (*http.Response, error) {
	op, err := operation(r.Op)
	if err != nil {
		return nil, err
	}
	path := op.Path
	for k, v := range r.Path {
		path = strings.ReplaceAll(path, "{"+k+"}", url.PathEscape(v))
	}
	if strings.Contains(path, "{") {
		return nil, api.Errorf(api.Internal, "operation %s: path %s lacks a parameter", r.Op, path)
	}
	u := *c.base
	u.Path = strings.TrimRight(c.base.Path, "/") + api.Prefix + path
	u.RawQuery = r.Query.Encode()
	var body io.Reader
	if r.Body != nil {
		b, err := json.Marshal(r.Body)
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, op.Method, u.String(), body)
	if err != nil {
		return nil, err
	}
	for k, vs := range r.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/json")
	telemetry.Inject(ctx, req.Header) // the server's spans join the caller's trace
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(err)
	}
	if res.StatusCode >= 400 {
		defer res.Body.Close()
		return nil, problemError(res)
	}
	return res, nil
}

// CallPage calls an operation and decodes its document into out (nil:
// none); a document that comes with an error (200 with
// Coffer-Error-Class) is decoded and the error returned with it, as the
// service returns both. For a paged listing it also returns the cursor of
// the next page (api.NextHeader), "" after the last.
func (c *Client) CallPage(ctx context.Context, r Request, out any) (next string, err error) {
	res, err := c.do(ctx, r)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	if out != nil && res.StatusCode != http.StatusNoContent {
		if err := json.NewDecoder(res.Body).Decode(out); err != nil {
			return "", fmt.Errorf("the server's answer to %s: %w", r.Op, err)
		}
	}
	return res.Header.Get(api.NextHeader), headerError(res.Header)
}

// Download calls an operation that answers with a file and writes it to
// w. A transfer the server aborted halfway fails (what was written must
// be discarded); a partial error (entries skipped) comes in the trailers
// after a whole file.
func (c *Client) Download(ctx context.Context, r Request, w io.Writer) error {
	res, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if _, err := io.Copy(w, res.Body); err != nil {
		return fmt.Errorf("the download ended halfway (%v): discard what was written", err)
	}
	return headerError(res.Trailer)
}

// headerError is the error an answer's Coffer-Error-Class header (or
// trailer) carries, nil when none.
func headerError(h http.Header) error {
	class := h.Get(api.ErrorClassHeader)
	if class == "" {
		return nil
	}
	return &api.Error{Class: api.Class(class), Message: api.UnescapeHeader(h.Get(api.ErrorHeader))}
}

// problemError turns a problem answer into the error of its class.
func problemError(res *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	var p struct {
		Title  string    `json:"title"`
		Detail string    `json:"detail"`
		Class  api.Class `json:"class"`
	}
	if json.Unmarshal(b, &p) != nil || p.Class == "" {
		return api.Errorf(api.Internal, "the server answered %s: %s", res.Status, strings.TrimSpace(string(b)))
	}
	msg := p.Detail
	if msg == "" {
		msg = p.Title
	}
	if ra := res.Header.Get("Retry-After"); ra != "" && p.Class == api.Throttled {
		msg += " (retry after " + ra + "s)"
	}
	return &api.Error{Class: p.Class, Message: "server: " + msg}
}

// transportError explains a request that reached no answer.
func (c *Client) transportError(err error) error {
	var uerr x509.UnknownAuthorityError
	var herr x509.HostnameError
	switch {
	case errors.Is(err, context.Canceled):
		return api.WithClass(api.Cancelled, err)
	case errors.As(err, &uerr), errors.As(err, &herr):
		return api.Errorf(api.Unauthenticated, "%v: trust the server's certificate with --server-fingerprint "+
			"(coffer server prints it) or --server-ca-file", err)
	case strings.Contains(err.Error(), "fingerprint"):
		return api.WithClass(api.Unauthenticated, err)
	}
	return fmt.Errorf("cannot reach the server %s: %w", c.base.Host, err)
}

// Events calls an operation that answers with server-sent events and
// calls each with every event's name and data, until the stream ends.
func (c *Client) Events(ctx context.Context, r Request, each func(event string, data []byte) error) error {
	res, err := c.do(ctx, r)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	event, data := "", []byte(nil)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if data != nil {
				if err := each(event, data); err != nil {
					return err
				}
			}
			event, data = "", nil
		case strings.HasPrefix(line, ":"): // a keep-alive comment
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: ")...)
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("the event stream ended: %w", err)
	}
	return ctx.Err()
}
