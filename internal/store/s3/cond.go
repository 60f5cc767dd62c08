package s3

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/coffer-backup/coffer/internal/store"
)

// Conditional writes without server support. When the server ignores
// If-None-Match / If-Match (older MinIO, Ceph before Squid, many gateways),
// the store reports ConditionalWrites == false and emulates the conditions:
//
//  1. HEAD the name and check the condition (absent, or the expected ETag);
//  2. PUT the object with this write's token;
//  3. HEAD again: if another writer's token is there, this write lost.
//
// This catches every conflict except two writers whose steps 1-3 overlap
// exactly, which both believe they won. coffer only uses conditions for the
// config at init, key files, index segments (unique names, so no conflict)
// and the maintenance lease; on such servers run garbage collection from
// one host only, which `coffer init` says when it detects the fallback.

// probeConditional finds out whether the server enforces If-None-Match. It
// writes a hidden marker object with the condition: a 412 proves support,
// and so does a first success followed by a 412. The marker is left in
// place (deleting it would need delete permission, which an append-only
// credential lacks, and would add versions on a versioned bucket).
func (s *Store) probeConditional(ctx context.Context) (bool, error) {
	put := func() error {
		_, err := s.cli.PutObject(ctx, &s3.PutObjectInput{
			Bucket: &s.cfg.Bucket, Key: aws.String(s.prefix + probeName), Body: strings.NewReader("coffer"),
			IfNoneMatch: aws.String("*"), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c,
		})
		return err
	}
	for range 2 {
		err := put()
		switch {
		case err == nil:
			continue
		case isPrecondition(err):
			return true, nil
		case errorCode(err) == "NotImplemented" || httpStatus(err) == http.StatusNotImplemented:
			return false, nil
		default:
			return false, fmt.Errorf("s3: probe conditional writes: %w", translate(err))
		}
	}
	s.log.Warn("the S3 server ignores If-None-Match: leases fall back to write-then-verify", "endpoint", s.endpoint())
	return false, nil
}

// checkBefore is step 1 of the emulation.
func (w *writer) checkBefore() error {
	out, err := w.s.cli.HeadObject(w.ctx, &s3.HeadObjectInput{Bucket: &w.s.cfg.Bucket, Key: &w.key})
	exists := err == nil
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("commit %s: %w", w.name, translate(err))
	}
	switch {
	case w.opts.IfNotExists && exists:
		return fmt.Errorf("commit %s: %w", w.name, store.ErrExists)
	case w.opts.IfMatch != "" && !exists:
		return fmt.Errorf("commit %s: %w", w.name, store.ErrNotFound)
	case w.opts.IfMatch != "" && aws.ToString(out.ETag) != w.opts.IfMatch:
		return fmt.Errorf("commit %s: %w", w.name, store.ErrPreconditionFailed)
	}
	return nil
}

// checkAfter is step 3: the object must still carry this write's token.
func (w *writer) checkAfter() error {
	if w.confirmOwnWrite() {
		return nil
	}
	if w.opts.IfNotExists {
		return fmt.Errorf("commit %s: a concurrent writer won: %w", w.name, store.ErrExists)
	}
	return fmt.Errorf("commit %s: a concurrent writer won: %w", w.name, store.ErrPreconditionFailed)
}

func (w *writer) emulated() bool {
	return !w.s.cond && (w.opts.IfNotExists || w.opts.IfMatch != "")
}

func isNotFound(err error) bool {
	c := errorCode(err)
	return c == "NoSuchKey" || c == "NotFound" || httpStatus(err) == http.StatusNotFound
}
