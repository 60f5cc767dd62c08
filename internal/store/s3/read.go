package s3

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/coffer-backup/coffer/internal/store"
)

// resumeAttempts bounds how often one Read re-opens a body that broke.
const resumeAttempts = 8

// Read implements store.Store. S3 silently shortens a range that runs past
// the end of an object, so the object's size (from Content-Range) is checked
// to report ErrInvalidRange as the contract requires.
func (s *Store) Read(ctx context.Context, name string, off, length int64) (io.ReadCloser, error) {
	key, err := s.key(name)
	if err != nil {
		return nil, err
	}
	if off < 0 {
		return nil, fmt.Errorf("read %s at %d: %w", name, off, store.ErrInvalidRange)
	}
	if length == 0 || (length < 0 && off > 0) {
		// Zero-length reads and reads from the very end cannot be expressed
		// as an HTTP range: check them against the size.
		fi, err := s.Stat(ctx, name)
		if err != nil {
			return nil, err
		}
		if length == 0 || off == fi.Size {
			if off > fi.Size {
				return nil, fmt.Errorf("read %s [%d,+%d) of %d bytes: %w", name, off, length, fi.Size, store.ErrInvalidRange)
			}
			return io.NopCloser(bytes.NewReader(nil)), nil
		}
	}
	b := &body{s: s, ctx: ctx, name: name, key: key, pos: off, end: -1}
	if length > 0 {
		b.end = off + length
	}
	if err := b.open(); err != nil {
		return nil, err
	}
	if length > 0 && b.total < off+length {
		_ = b.Close() // a response body, read only
		return nil, fmt.Errorf("read %s [%d,+%d) of %d bytes: %w", name, off, length, b.total, store.ErrInvalidRange)
	}
	return b, nil
}

// body is an object's bytes that survives dropped connections: a read error
// re-requests the remaining range, pinned with If-Match to the same ETag so
// the resumed bytes come from the same object.
type body struct {
	s        *Store
	ctx      context.Context
	name     string
	key      string
	etag     string
	pos, end int64 // end -1: to the end of the object
	total    int64
	rc       io.ReadCloser
	resumes  int
}

func (b *body) open() error {
	in := &s3.GetObjectInput{Bucket: &b.s.cfg.Bucket, Key: &b.key}
	if b.pos > 0 || b.end >= 0 {
		r := "bytes=" + strconv.FormatInt(b.pos, 10) + "-"
		if b.end >= 0 {
			r += strconv.FormatInt(b.end-1, 10)
		}
		in.Range = &r
	}
	if b.etag != "" {
		in.IfMatch = &b.etag
	}
	if err := b.s.acquire(b.ctx); err != nil {
		return err
	}
	out, err := b.s.cli.GetObject(b.ctx, in)
	b.s.release()
	if err != nil {
		if b.etag != "" && isPrecondition(err) {
			return fmt.Errorf("read %s: the object was replaced while being read", b.name)
		}
		return fmt.Errorf("read %s: %w", b.name, translate(err))
	}
	b.rc = out.Body
	b.etag = aws.ToString(out.ETag)
	b.total = aws.ToInt64(out.ContentLength) + b.pos
	if t, ok := totalFromRange(aws.ToString(out.ContentRange)); ok {
		b.total = t
	}
	if b.end < 0 {
		b.end = b.total
	}
	return nil
}

// totalFromRange parses the size from "bytes 0-99/100".
func totalFromRange(cr string) (int64, bool) {
	i := strings.LastIndexByte(cr, '/')
	if i < 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(cr[i+1:], 10, 64)
	return n, err == nil
}

func (b *body) Read(p []byte) (int, error) {
	for {
		if b.pos >= b.end {
			return 0, io.EOF
		}
		if b.rc == nil {
			if err := b.open(); err != nil {
				return 0, err
			}
		}
		if rem := b.end - b.pos; int64(len(p)) > rem {
			p = p[:rem]
		}
		n, err := b.rc.Read(p)
		b.pos += int64(n)
		if err == nil || (err == io.EOF && b.pos >= b.end) {
			if n > 0 || err == nil {
				return n, nil
			}
			return 0, io.EOF
		}
		if b.ctx.Err() != nil {
			return n, b.ctx.Err()
		}
		// The connection broke (or ended early): resume from b.pos.
		_ = b.rc.Close() // the broken response is replaced
		b.rc = nil
		b.resumes++
		if b.resumes > resumeAttempts {
			return n, fmt.Errorf("read %s: connection lost %d times: %w", b.name, b.resumes, err)
		}
		b.s.log.Debug("s3 read interrupted, resuming", "object", b.name, "at", b.pos, "err", err)
		if n > 0 {
			return n, nil // the next Read re-opens
		}
		if err := sleepCtx(b.ctx, backoff(b.resumes)); err != nil {
			return 0, err
		}
	}
}

func (b *body) Close() error {
	if b.rc != nil {
		err := b.rc.Close()
		b.rc = nil
		return err
	}
	return nil
}

// Stat implements store.Store.
func (s *Store) Stat(ctx context.Context, name string) (store.ObjectInfo, error) {
	key, err := s.key(name)
	if err != nil {
		return store.ObjectInfo{}, err
	}
	if err := s.acquire(ctx); err != nil {
		return store.ObjectInfo{}, err
	}
	out, err := s.cli.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &s.cfg.Bucket, Key: &key})
	s.release()
	if err != nil {
		return store.ObjectInfo{}, fmt.Errorf("stat %s: %w", name, translate(err))
	}
	return store.ObjectInfo{Name: name, Size: aws.ToInt64(out.ContentLength), ModTime: aws.ToTime(out.LastModified),
		Version: aws.ToString(out.ETag), RetainUntil: aws.ToTime(out.ObjectLockRetainUntilDate)}, nil
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, prefix string, fn func(store.ObjectInfo) error) error {
	p := s3.NewListObjectsV2Paginator(s.cli, &s3.ListObjectsV2Input{Bucket: &s.cfg.Bucket, Prefix: aws.String(s.prefix + prefix)})
	for p.HasMorePages() {
		if err := s.acquire(ctx); err != nil {
			return err
		}
		page, err := p.NextPage(ctx)
		s.release()
		if err != nil {
			return fmt.Errorf("list %q: %w", prefix, translate(err))
		}
		for _, o := range page.Contents {
			name := strings.TrimPrefix(aws.ToString(o.Key), s.prefix)
			if validName(name) != nil {
				continue // the probe marker, or foreign keys sharing the prefix
			}
			fi := store.ObjectInfo{Name: name, Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified), Version: aws.ToString(o.ETag)}
			if err := fn(fi); err != nil {
				return err
			}
		}
	}
	return nil
}

// backoff is capped exponential backoff with full jitter, for the retries
// this package does itself (resumed reads); the SDK does the same for
// whole requests.
func backoff(attempt int) time.Duration {
	d := min(100*time.Millisecond<<min(attempt, 8), 10*time.Second)
	return time.Duration(rand.Int64N(int64(d)) + 1)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
