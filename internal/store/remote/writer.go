package remote

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"time"

	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/remote/wire"
)

// writer streams one object's body as a PUT. The body ends with a
// trailer holding its SHA-256, sent only by Commit: the server stores
// the object only then, so an Abort, a cancelled context or a killed
// process never leaves an object behind.
type writer struct {
	name    string
	pw      *bufPipe
	req     *http.Request
	sum     hash.Hash32
	cancel  context.CancelFunc
	done    chan result
	settled bool    // Commit or Abort called, or the request failed
	res     *result // the request's end, once received
}

type result struct {
	fi  store.ObjectInfo
	err error
}

var errAborted = errors.New("write aborted")

// Create implements store.Store.
func (s *Store) Create(ctx context.Context, name string, opts store.PutOptions) (store.ObjectWriter, error) {
	ctx, cancel := context.WithCancel(ctx)
	pipe := newBufPipe()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.base+objectPath(name), pipe)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+s.secret)
	req.Header.Set("Content-Type", "application/octet-stream")
	if opts.IfNotExists {
		req.Header.Set("If-None-Match", "*")
	}
	if opts.IfMatch != "" {
		req.Header.Set("If-Match", strconv.Quote(opts.IfMatch))
	}
	if opts.SizeHint > 0 {
		req.Header.Set(wire.SizeHintHeader, strconv.FormatInt(opts.SizeHint, 10))
	}
	if !opts.RetainUntil.IsZero() {
		req.Header.Set(wire.RetainUntilHeader, opts.RetainUntil.UTC().Format(time.RFC3339Nano))
	}
	req.ContentLength = -1 // chunked, so that the trailer can follow
	req.Trailer = http.Header{wire.CommitTrailer: nil}
	w := &writer{name: name, pw: pipe, req: req, sum: wire.NewCommitSum(), cancel: cancel, done: make(chan result, 1)}
	go func() {
		resp, err := s.hc.Do(req)
		// An answer before the body's end (a refusal) unblocks Write.
		pipe.CloseRead(errAborted)
		if err != nil {
			w.done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 300 {
			w.done <- result{err: answerError(resp)}
			return
		}
		fi, err := described(name, resp.Header)
		w.done <- result{fi: fi, err: err}
	}()
	return w, nil
}

func (w *writer) Write(p []byte) (int, error) {
	w.sum.Write(p)
	n, err := w.pw.Write(p)
	if err != nil {
		return n, w.fail(err)
	}
	return n, nil
}

// wait is the request's end (received once, then kept).
func (w *writer) wait() result {
	if w.res == nil {
		r := <-w.done
		w.res = &r
	}
	return *w.res
}

// fail is the request's own error once the body cannot be written: the
// server's refusal says more than the closed pipe.
func (w *writer) fail(err error) error {
	w.settled = true
	w.cancel()
	if r := w.wait(); r.err != nil {
		return fmt.Errorf("write %s: %w", w.name, r.err)
	}
	return fmt.Errorf("write %s: %w", w.name, err)
}

// Commit implements store.ObjectWriter.
func (w *writer) Commit() (store.ObjectInfo, error) {
	if w.settled {
		return store.ObjectInfo{}, fmt.Errorf("write %s: already finished", w.name)
	}
	w.settled = true
	// The trailer is set before the body's end: the pipe orders this
	// write before the transport's read of the trailer.
	w.req.Trailer.Set(wire.CommitTrailer, wire.CommitValue(w.sum))
	w.pw.CloseWrite(nil)
	r := w.wait()
	w.cancel()
	if r.err != nil {
		return store.ObjectInfo{}, fmt.Errorf("write %s: %w", w.name, r.err)
	}
	return r.fi, nil
}

// Abort implements store.ObjectWriter.
func (w *writer) Abort() error {
	if w.settled {
		return nil
	}
	w.settled = true
	w.pw.CloseWrite(errAborted)
	w.cancel()
	w.wait()
	return nil
}
