// Package remote is the store backend for a repository served by a coffer
// repository server (`coffer repository serve`, internal/reposerver): the
// location is the server's https:// URL, and each client holds a
// credential of its own whose right (read, append, maintain) the server
// enforces. The protocol is in package wire.
package remote

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/remote/wire"
)

// Config says how to reach a repository server.
type Config struct {
	// URL is the server's base URL: https://host:port[/path].
	URL string
	// Credential is the secret `coffer repository credential add` printed.
	Credential string
	// CAFile is a PEM file of CAs trusted for the server's certificate,
	// in addition to the system's.
	CAFile string
}

// Store is a repository server's store.
type Store struct {
	base   string
	secret string
	hc     *http.Client
	props  wire.Properties
}

var _ store.Store = (*Store)(nil)

// Open connects to the server and checks the credential: an unknown one
// fails here, before any work.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("repository server %q: want https://host:port", cfg.URL)
	}
	if cfg.Credential == "" {
		return nil, fmt.Errorf("repository server %s: no credential (repository-credential-file)", u.Redacted())
	}
	tlsCfg, err := tlsConfig(cfg.CAFile)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tlsCfg
	tr.MaxIdleConnsPerHost = 16
	tr.Protocols = wire.Protocols()
	s := &Store{base: strings.TrimSuffix(u.String(), "/"), secret: cfg.Credential, hc: &http.Client{Transport: tr}}
	resp, err := s.do(ctx, http.MethodGet, wire.PropertiesPath, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("repository server %s: %w", s.base, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&s.props); err != nil {
		return nil, fmt.Errorf("repository server %s: properties: %w", s.base, err)
	}
	return s, nil
}

func tlsConfig(caFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return cfg, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("repository server CA: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("repository server CA %s: no PEM certificate in it", caFile)
	}
	cfg.RootCAs = pool
	return cfg, nil
}

// Right is what the credential may do, as the server said at Open.
func (s *Store) Right() string { return s.props.Right }

// Properties implements store.Store.
func (s *Store) Properties() store.Properties {
	return store.Properties{Location: s.base, Connections: max(s.props.Connections, 1),
		ConditionalWrites: s.props.ConditionalWrites, Retention: s.props.Retention, Remote: true}
}

// Close implements store.Store.
func (s *Store) Close() error {
	s.hc.CloseIdleConnections()
	return nil
}

func objectPath(name string) string { return wire.ObjectsPath + name }

// do sends one request and turns an error answer into the store's
// sentinel. The caller closes the body of a successful response.
func (s *Store) do(ctx context.Context, method, path string, body io.Reader, edit func(*http.Request)) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.base+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.secret)
	if edit != nil {
		edit(req)
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, answerError(resp)
}

// answerError is the store error an error answer stands for.
func answerError(resp *http.Response) error {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	text := strings.TrimSpace(string(msg))
	if text == "" {
		text = resp.Status
	}
	code := resp.Header.Get(wire.ErrorHeader)
	switch sentinel := wire.SentinelOf(code); {
	case errors.Is(sentinel, wire.ErrUnauthenticated):
		// Access denied, as a wrong password is (exit code 3).
		return fmt.Errorf("%w: %w", store.ErrPermission, sentinel)
	case sentinel != nil:
		return fmt.Errorf("%w (repository server: %s)", sentinel, text)
	}
	return fmt.Errorf("repository server: %s (%s)", text, resp.Status)
}

// Read implements store.Store.
func (s *Store) Read(ctx context.Context, name string, off, length int64) (io.ReadCloser, error) {
	q := url.Values{"off": {strconv.FormatInt(off, 10)}, "len": {strconv.FormatInt(length, 10)}}
	resp, err := s.do(ctx, http.MethodGet, objectPath(name)+"?"+q.Encode(), nil, nil)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return resp.Body, nil
}

// Stat implements store.Store.
func (s *Store) Stat(ctx context.Context, name string) (store.ObjectInfo, error) {
	resp, err := s.do(ctx, http.MethodHead, objectPath(name), nil, nil)
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("stat %s: %w", name, err)
	}
	resp.Body.Close()
	return described(name, resp.Header)
}

// described reads an object's description from an answer's headers.
func described(name string, h http.Header) (store.ObjectInfo, error) {
	fi := store.ObjectInfo{Name: name, Version: h.Get(wire.VersionHeader)}
	var err error
	if fi.Size, err = strconv.ParseInt(h.Get(wire.SizeHeader), 10, 64); err != nil {
		return fi, fmt.Errorf("repository server: %s: size: %w", name, err)
	}
	if fi.ModTime, err = time.Parse(time.RFC3339Nano, h.Get(wire.ModTimeHeader)); err != nil {
		return fi, fmt.Errorf("repository server: %s: modification time: %w", name, err)
	}
	if v := h.Get(wire.RetainUntilHeader); v != "" {
		if fi.RetainUntil, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return fi, fmt.Errorf("repository server: %s: retention: %w", name, err)
		}
	}
	return fi, nil
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, prefix string, fn func(store.ObjectInfo) error) error {
	resp, err := s.do(ctx, http.MethodGet, wire.ListPath+"?"+url.Values{"prefix": {prefix}}.Encode(), nil, nil)
	if err != nil {
		return fmt.Errorf("list %s: %w", prefix, err)
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var e wire.ListEntry
		if err := dec.Decode(&e); err != nil {
			return fmt.Errorf("list %s: the listing was cut off: %w", prefix, err)
		}
		switch {
		case e.End:
			return nil
		case e.Error != "":
			if sentinel := wire.SentinelOf(e.ErrorCode); sentinel != nil {
				return fmt.Errorf("list %s: %w (repository server: %s)", prefix, sentinel, e.Error)
			}
			return fmt.Errorf("list %s: repository server: %s", prefix, e.Error)
		}
		if err := fn(store.ObjectInfo{Name: e.Name, Size: e.Size, ModTime: e.ModTime, Version: e.Version, RetainUntil: e.RetainUntil}); err != nil {
			return err
		}
	}
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, name string) error {
	resp, err := s.do(ctx, http.MethodDelete, objectPath(name), nil, nil)
	if err != nil {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	resp.Body.Close()
	return nil
}

// ExtendRetention implements store.Retainer (the repository uses it only
// when Properties says the server keeps retention).
func (s *Store) ExtendRetention(ctx context.Context, name string, until time.Time) error {
	resp, err := s.do(ctx, http.MethodPost, wire.RetainPath+name, nil, func(r *http.Request) {
		r.Header.Set(wire.RetainUntilHeader, until.UTC().Format(time.RFC3339Nano))
	})
	if err != nil {
		return fmt.Errorf("lock %s: %w", name, err)
	}
	resp.Body.Close()
	return nil
}
