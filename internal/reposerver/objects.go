package reposerver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/remote/wire"
)

func (s *Server) get(w http.ResponseWriter, r *http.Request, _ Credential) {
	name, ok := s.objectName(w, r)
	if !ok {
		return
	}
	off, length, err := parseRange(r.URL.Query())
	if err != nil {
		s.invalid(w, err.Error())
		return
	}
	rc, err := s.st.Read(r.Context(), name, off, length)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer rc.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	if length >= 0 {
		w.Header().Set("Content-Length", strconv.FormatInt(length, 10))
	}
	if err := send(w, rc); err != nil {
		// Cut the connection: a body ended cleanly would pass for the
		// whole object.
		s.log.Warn("repository server: read cut", "object", name, "err", err)
		panic(http.ErrAbortHandler)
	}
}

// sendBufferBytes is what the server reads of an object at a time. Over
// TLS the response writer copies through 32 KiB (it cannot hand the file
// to the kernel), so a 4 MiB range cost 128 reads of the file; 1 MiB
// reads cost 4, as a local restore reading its ranges at once does.
const sendBufferBytes = 1 << 20

var sendBuffers = sync.Pool{New: func() any { b := make([]byte, sendBufferBytes); return &b }}

// send copies rc to w in large reads.
func send(w io.Writer, rc io.Reader) error {
	b := sendBuffers.Get().(*[]byte)
	defer sendBuffers.Put(b)
	_, err := io.CopyBuffer(struct{ io.Writer }{w}, struct{ io.Reader }{rc}, *b)
	return err
}

// parseRange reads the off and len query parameters: the store's own
// range (len -1 or absent: to the end), passed to the store as is.
func parseRange(q url.Values) (off, length int64, err error) {
	off, length = 0, -1
	if v := q.Get("off"); v != "" {
		if off, err = strconv.ParseInt(v, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("off %q: %v", v, err)
		}
	}
	if v := q.Get("len"); v != "" {
		if length, err = strconv.ParseInt(v, 10, 64); err != nil {
			return 0, 0, fmt.Errorf("len %q: %v", v, err)
		}
	}
	return off, length, nil
}

func (s *Server) head(w http.ResponseWriter, r *http.Request, _ Credential) {
	name, ok := s.objectName(w, r)
	if !ok {
		return
	}
	fi, err := s.st.Stat(r.Context(), name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	describe(w.Header(), fi)
	w.WriteHeader(http.StatusOK)
}

func describe(h http.Header, fi store.ObjectInfo) {
	h.Set(wire.VersionHeader, fi.Version)
	h.Set(wire.SizeHeader, strconv.FormatInt(fi.Size, 10))
	h.Set(wire.ModTimeHeader, fi.ModTime.UTC().Format(time.RFC3339Nano))
	if !fi.RetainUntil.IsZero() {
		h.Set(wire.RetainUntilHeader, fi.RetainUntil.UTC().Format(time.RFC3339Nano))
	}
}

func (s *Server) put(w http.ResponseWriter, r *http.Request, c Credential) {
	name, ok := s.objectName(w, r)
	if !ok {
		return
	}
	opts, err := putOptions(r)
	if err != nil {
		s.invalid(w, err.Error())
		return
	}
	if err := c.Right.checkPut(name, &opts); err != nil {
		s.log.Warn("repository server: write refused", "credential", c.Name, "object", name, "err", err)
		s.fail(w, r, err)
		return
	}
	if r.ContentLength > s.o.MaxObjectBytes {
		s.invalid(w, fmt.Sprintf("%s: %d bytes is more than the server's bound of %d", name, r.ContentLength, s.o.MaxObjectBytes))
		return
	}
	ow, err := s.st.Create(r.Context(), name, opts)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.receive(w, r, ow); err != nil {
		_ = ow.Abort()
		if errors.Is(err, errBadBody) {
			s.invalid(w, err.Error())
		} else {
			s.fail(w, r, err)
		}
		return
	}
	fi, err := ow.Commit()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Debug("repository server: object written", "credential", c.Name, "object", name, "size", fi.Size)
	describe(w.Header(), fi)
	w.WriteHeader(http.StatusCreated)
}

func putOptions(r *http.Request) (store.PutOptions, error) {
	opts := store.PutOptions{IfNotExists: r.Header.Get("If-None-Match") == "*",
		IfMatch: strings.Trim(r.Header.Get("If-Match"), `"`)}
	if r.ContentLength > 0 {
		opts.SizeHint = r.ContentLength
	} else if v := r.Header.Get(wire.SizeHintHeader); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return opts, fmt.Errorf("%s %q: not a size", wire.SizeHintHeader, v)
		}
		opts.SizeHint = n
	}
	if v := r.Header.Get(wire.RetainUntilHeader); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return opts, fmt.Errorf("%s %q: %v", wire.RetainUntilHeader, v, err)
		}
		opts.RetainUntil = t
	}
	return opts, nil
}

// errBadBody is a body that may not become an object: too long, cut
// short, stalled, or not the one its commit trailer names.
var errBadBody = errors.New("the object's body")

// receive copies the body into ow, extending the read deadline while
// bytes arrive, and checks the commit trailer at its end.
func (s *Server) receive(w http.ResponseWriter, r *http.Request, ow store.ObjectWriter) error {
	rc := http.NewResponseController(w)
	body := http.MaxBytesReader(w, r.Body, s.o.MaxObjectBytes)
	sum := wire.NewCommitSum()
	buf := make([]byte, 256<<10)
	for {
		_ = rc.SetReadDeadline(time.Now().Add(s.o.IdleTimeout))
		n, err := body.Read(buf)
		if n > 0 {
			sum.Write(buf[:n])
			if _, werr := ow.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("%w was cut: %v", errBadBody, err)
		}
	}
	if got, want := wire.CommitValue(sum), r.Trailer.Get(wire.CommitTrailer); got != want {
		return fmt.Errorf("%w does not match its commit trailer (%q): not stored", errBadBody, want)
	}
	return nil
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request, c Credential) {
	name, ok := s.objectName(w, r)
	if !ok {
		return
	}
	if err := c.Right.checkDelete(name); err != nil {
		s.log.Warn("repository server: delete refused", "credential", c.Name, "object", name)
		s.fail(w, r, err)
		return
	}
	if err := s.st.Delete(r.Context(), name); err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Debug("repository server: object deleted", "credential", c.Name, "object", name)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) list(w http.ResponseWriter, r *http.Request, _ Credential) {
	prefix := r.URL.Query().Get("prefix")
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	// A listing streams, so a failure part-way cannot change the status:
	// its last line says how it ended.
	err := s.st.List(r.Context(), prefix, func(fi store.ObjectInfo) error {
		return enc.Encode(wire.ListEntry{Name: fi.Name, Size: fi.Size, ModTime: fi.ModTime, Version: fi.Version, RetainUntil: fi.RetainUntil})
	})
	end := wire.ListEntry{End: true}
	if err != nil {
		code, _ := wire.CodeOf(err)
		end = wire.ListEntry{Error: err.Error(), ErrorCode: code}
	}
	_ = enc.Encode(end)
}

func (s *Server) properties(w http.ResponseWriter, _ *http.Request, c Credential) {
	p := s.st.Properties()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(wire.Properties{ConditionalWrites: p.ConditionalWrites, Retention: p.Retention,
		Connections: s.o.Connections, Right: string(c.Right)})
}

// retain extends an object's lock: never destructive, so any right that
// writes may (a backup extends the locks of the packs it shares).
func (s *Server) retain(w http.ResponseWriter, r *http.Request, c Credential) {
	name, ok := s.objectName(w, r)
	if !ok {
		return
	}
	if c.Right == Read {
		s.fail(w, r, fmt.Errorf("%w: this read credential may not lock %s", store.ErrPermission, name))
		return
	}
	rt, ok := s.st.(store.Retainer)
	if !ok || !s.st.Properties().Retention {
		s.invalid(w, "this repository server keeps no retention (serve with --immutable)")
		return
	}
	opts, err := putOptions(r)
	if err != nil || opts.RetainUntil.IsZero() {
		s.invalid(w, fmt.Sprintf("%s: want %s", name, wire.RetainUntilHeader))
		return
	}
	if err := rt.ExtendRetention(r.Context(), name, opts.RetainUntil); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
