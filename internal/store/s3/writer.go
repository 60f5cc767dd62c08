package s3

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/coffer-backup/coffer/internal/store"
)

// tokenKey is the user metadata entry that identifies one write (see
// confirmOwnWrite).
const tokenKey = "coffer-token"

// partsInFlight bounds the parts one writer uploads at once, so a writer
// holds at most (partsInFlight+1) × PartSize bytes.
const partsInFlight = 2

// Create implements store.Store. Bytes are buffered up to one part; an
// object that fits is sent with a single PutObject at Commit, a larger one
// becomes a multipart upload whose parts go out while the caller writes.
func (s *Store) Create(ctx context.Context, name string, opts store.PutOptions) (store.ObjectWriter, error) {
	key, err := s.key(name)
	if err != nil {
		return nil, err
	}
	var tok [12]byte
	_, _ = rand.Read(tok[:])
	w := &writer{s: s, ctx: ctx, name: name, key: key, opts: opts, token: hex.EncodeToString(tok[:]),
		inflight: make(chan struct{}, partsInFlight)}
	if opts.SizeHint > 0 && opts.SizeHint <= s.cfg.PartSize {
		w.buf = make([]byte, 0, opts.SizeHint)
	}
	return w, nil
}

type writer struct {
	s     *Store
	ctx   context.Context
	name  string
	key   string
	opts  store.PutOptions
	token string
	buf   []byte
	size  int64

	uploadID string
	inflight chan struct{}
	wg       sync.WaitGroup
	mu       sync.Mutex
	parts    []types.CompletedPart
	partErr  error

	done bool
	err  error
}

func (w *writer) Write(p []byte) (int, error) {
	if w.err != nil {
		return 0, w.err
	}
	if err := w.ctx.Err(); err != nil {
		w.err = err
		return 0, err
	}
	n := 0
	for len(p) > 0 {
		room := int(w.s.cfg.PartSize) - len(w.buf)
		if room == 0 {
			if err := w.flushPart(); err != nil {
				w.err = err
				return n, err
			}
			continue
		}
		k := min(room, len(p))
		w.buf = append(w.buf, p[:k]...)
		p, n = p[k:], n+k
		w.size += int64(k)
	}
	return n, nil
}

// flushPart hands the full buffer to a background upload.
func (w *writer) flushPart() error {
	if err := w.firstErr(); err != nil {
		return err
	}
	if w.uploadID == "" {
		if err := w.startMultipart(); err != nil {
			return err
		}
	}
	select {
	case w.inflight <- struct{}{}:
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
	num := int32(len(w.parts) + 1)
	w.mu.Lock()
	w.parts = append(w.parts, types.CompletedPart{PartNumber: aws.Int32(num)})
	w.mu.Unlock()
	data := w.buf
	w.buf = make([]byte, 0, w.s.cfg.PartSize)
	w.wg.Add(1)
	go func() {
		defer func() { <-w.inflight; w.wg.Done() }()
		err := w.uploadPart(num, data)
		if err != nil {
			w.mu.Lock()
			if w.partErr == nil {
				w.partErr = err
			}
			w.mu.Unlock()
		}
	}()
	return nil
}

func (w *writer) firstErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.partErr
}

func (w *writer) startMultipart() error {
	in := &s3.CreateMultipartUploadInput{Bucket: &w.s.cfg.Bucket, Key: &w.key,
		Metadata: map[string]string{tokenKey: w.token}, ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c}
	if mode, until, ok := w.s.lockFor(w.opts.RetainUntil); ok {
		in.ObjectLockMode, in.ObjectLockRetainUntilDate = mode, &until
	}
	if err := w.s.acquire(w.ctx); err != nil {
		return err
	}
	out, err := w.s.cli.CreateMultipartUpload(w.ctx, in)
	w.s.release()
	if err != nil {
		return fmt.Errorf("start upload of %s: %w", w.name, translate(err))
	}
	w.uploadID = aws.ToString(out.UploadId)
	return nil
}

func (w *writer) uploadPart(num int32, data []byte) error {
	if err := w.s.acquire(w.ctx); err != nil {
		return err
	}
	defer w.s.release()
	out, err := w.s.cli.UploadPart(w.ctx, &s3.UploadPartInput{Bucket: &w.s.cfg.Bucket, Key: &w.key, UploadId: &w.uploadID,
		PartNumber: aws.Int32(num), Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data))),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c})
	if err != nil {
		return fmt.Errorf("upload part %d of %s: %w", num, w.name, translate(err))
	}
	w.mu.Lock()
	w.parts[num-1].ETag, w.parts[num-1].ChecksumCRC32C = out.ETag, out.ChecksumCRC32C
	w.mu.Unlock()
	return nil
}

// lockFor returns the Object Lock settings for a write that asks for
// retention until t, when the bucket can enforce it.
func (s *Store) lockFor(t time.Time) (types.ObjectLockMode, time.Time, bool) {
	if t.IsZero() || !s.retention {
		return "", time.Time{}, false
	}
	return s.lockMode, t.UTC(), true
}

func (w *writer) Commit() (store.ObjectInfo, error) {
	if w.done {
		return store.ObjectInfo{}, errors.New("s3: commit called twice")
	}
	fail := func(err error) (store.ObjectInfo, error) {
		_ = w.Abort()
		return store.ObjectInfo{}, err
	}
	if w.err != nil {
		return fail(w.err)
	}
	if err := w.ctx.Err(); err != nil {
		return fail(err)
	}
	if w.emulated() {
		if err := w.checkBefore(); err != nil {
			return fail(err)
		}
	}
	var etag *string
	var err error
	if w.uploadID == "" {
		etag, err = w.putSingle()
	} else {
		etag, err = w.complete()
	}
	if err != nil {
		// A lost response to a request that succeeded makes its retry fail
		// with 412 (the condition now sees our object) or NoSuchUpload (the
		// upload was completed).
		ownWrite := (isPrecondition(err) || errorCode(err) == "NoSuchUpload") && w.confirmOwnWrite()
		if !ownWrite {
			return fail(w.conditionError(err))
		}
	}
	if w.emulated() {
		if err := w.checkAfter(); err != nil {
			w.done = true
			return store.ObjectInfo{}, err
		}
	}
	w.done = true
	fi := store.ObjectInfo{Name: w.name, Size: w.size, ModTime: time.Now(), Version: aws.ToString(etag)}
	if _, until, ok := w.s.lockFor(w.opts.RetainUntil); ok {
		fi.RetainUntil = until
	}
	if fi.Version == "" {
		return w.s.Stat(context.WithoutCancel(w.ctx), w.name)
	}
	return fi, nil
}

func (w *writer) conditionError(err error) error {
	if isPrecondition(err) && w.opts.IfNotExists {
		return fmt.Errorf("commit %s: %w", w.name, store.ErrExists)
	}
	return fmt.Errorf("commit %s: %w", w.name, translate(err))
}

func (w *writer) putSingle() (*string, error) {
	in := &s3.PutObjectInput{Bucket: &w.s.cfg.Bucket, Key: &w.key, Body: bytes.NewReader(w.buf),
		ContentLength: aws.Int64(int64(len(w.buf))), Metadata: map[string]string{tokenKey: w.token},
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c}
	w.conditions(&in.IfNoneMatch, &in.IfMatch)
	if mode, until, ok := w.s.lockFor(w.opts.RetainUntil); ok {
		in.ObjectLockMode, in.ObjectLockRetainUntilDate = mode, &until
	}
	if err := w.s.acquire(w.ctx); err != nil {
		return nil, err
	}
	defer w.s.release()
	out, err := w.s.cli.PutObject(w.ctx, in)
	if err != nil {
		return nil, err
	}
	return out.ETag, nil
}

func (w *writer) conditions(ifNoneMatch, ifMatch **string) {
	if !w.s.cond {
		return
	}
	if w.opts.IfNotExists {
		*ifNoneMatch = aws.String("*")
	}
	if w.opts.IfMatch != "" {
		*ifMatch = aws.String(w.opts.IfMatch)
	}
}

func (w *writer) complete() (*string, error) {
	if len(w.buf) > 0 || len(w.parts) == 0 {
		if err := w.flushPart(); err != nil {
			return nil, err
		}
	}
	w.wg.Wait()
	if err := w.firstErr(); err != nil {
		return nil, err
	}
	parts := append([]types.CompletedPart(nil), w.parts...)
	sort.Slice(parts, func(i, j int) bool { return *parts[i].PartNumber < *parts[j].PartNumber })
	in := &s3.CompleteMultipartUploadInput{Bucket: &w.s.cfg.Bucket, Key: &w.key, UploadId: &w.uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}
	w.conditions(&in.IfNoneMatch, &in.IfMatch)
	if err := w.s.acquire(w.ctx); err != nil {
		return nil, err
	}
	defer w.s.release()
	out, err := w.s.cli.CompleteMultipartUpload(w.ctx, in)
	if err != nil {
		return nil, err
	}
	w.uploadID = "" // completed: nothing left to abort
	return out.ETag, nil
}

// confirmOwnWrite settles a 412 on a conditional write: when the SDK
// retried a request whose first attempt had in fact succeeded, the object
// now holds our token and the write won.
func (w *writer) confirmOwnWrite() bool {
	out, err := w.s.cli.HeadObject(context.WithoutCancel(w.ctx), &s3.HeadObjectInput{Bucket: &w.s.cfg.Bucket, Key: &w.key})
	if err != nil {
		return false
	}
	if out.Metadata[tokenKey] == w.token {
		w.uploadID = ""
		return true
	}
	return false
}

func (w *writer) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	w.wg.Wait()
	w.buf = nil
	if w.uploadID == "" {
		return nil
	}
	// The caller's context may be the reason for the abort: clean up anyway.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(w.ctx), time.Minute)
	defer cancel()
	_, err := w.s.cli.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &w.s.cfg.Bucket, Key: &w.key, UploadId: &w.uploadID})
	if err != nil && errorCode(err) != "NoSuchUpload" {
		return fmt.Errorf("abort upload of %s: %w", w.name, translate(err))
	}
	return nil
}
