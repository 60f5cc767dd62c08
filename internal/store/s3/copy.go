package s3

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/coffer-backup/coffer/internal/store"
)

// maxSingleCopy is S3's limit for one CopyObject; larger objects are
// copied in parts (UploadPartCopy).
const maxSingleCopy = 5 << 30

// CopyFrom makes name a copy of the object fromName of another store on
// the same S3 service (another bucket or prefix): the service copies it
// (CopyObject, or UploadPartCopy in parts for an object larger than one
// copy may be), so no payload passes through this host. Like a multipart
// upload, a copy in parts is invisible until completed, so a crash leaves
// nothing under name. A store of another kind or on another service, or
// credentials that may not read the source: errors.ErrUnsupported (the
// caller copies through the host instead).
func (s *Store) CopyFrom(ctx context.Context, from store.Store, fromName, name string, opts store.PutOptions) (store.ObjectInfo, store.CopyMethod, error) {
	src, ok := store.Innermost(from).(*Store)
	if !ok || src.cfg.Endpoint != s.cfg.Endpoint || src.cli.Options().Region != s.cli.Options().Region {
		return store.ObjectInfo{}, "", fmt.Errorf("copy from %s: not on this S3 service: %w", from.Properties().Location, errors.ErrUnsupported)
	}
	srcKey, err := src.key(fromName)
	if err != nil {
		return store.ObjectInfo{}, "", err
	}
	key, err := s.key(name)
	if err != nil {
		return store.ObjectInfo{}, "", err
	}
	fi, err := src.Stat(ctx, fromName)
	if err != nil {
		return store.ObjectInfo{}, "", err
	}
	c := &serverCopy{s: s, source: src.cfg.Bucket + "/" + srcKey, key: key, size: fi.Size, opts: opts}
	limit := s.cfg.MaxCopySize
	if limit <= 0 {
		limit = maxSingleCopy
	}
	if fi.Size <= limit {
		err = c.single(ctx)
	} else {
		err = c.parts(ctx)
	}
	if errors.Is(err, store.ErrPermission) {
		// The target's credentials may not read the source: not a
		// failure of the copy, a copy the service cannot make for us.
		return store.ObjectInfo{}, "", fmt.Errorf("copy %s: %w (%w)", name, errors.ErrUnsupported, err)
	}
	if err != nil {
		return store.ObjectInfo{}, "", fmt.Errorf("copy %s: %w", name, err)
	}
	out, err := s.Stat(context.WithoutCancel(ctx), name)
	return out, store.CopyServerSide, err
}

type serverCopy struct {
	s      *Store
	source string // bucket/key
	key    string
	size   int64
	opts   store.PutOptions
}

func (c *serverCopy) single(ctx context.Context) error {
	in := &s3.CopyObjectInput{Bucket: &c.s.cfg.Bucket, Key: &c.key, CopySource: &c.source,
		MetadataDirective: types.MetadataDirectiveReplace}
	if mode, until, ok := c.s.lockFor(c.opts.RetainUntil); ok {
		in.ObjectLockMode, in.ObjectLockRetainUntilDate = mode, &until
	}
	if err := c.s.acquire(ctx); err != nil {
		return err
	}
	defer c.s.release()
	_, err := c.s.cli.CopyObject(ctx, in)
	return translate(err)
}

// parts copies in parts of the store's part size; an interrupted copy is
// aborted (or, after a crash, an incomplete upload RemoveLeftovers ends).
func (c *serverCopy) parts(ctx context.Context) error {
	in := &s3.CreateMultipartUploadInput{Bucket: &c.s.cfg.Bucket, Key: &c.key}
	if mode, until, ok := c.s.lockFor(c.opts.RetainUntil); ok {
		in.ObjectLockMode, in.ObjectLockRetainUntilDate = mode, &until
	}
	if err := c.s.acquire(ctx); err != nil {
		return err
	}
	up, err := c.s.cli.CreateMultipartUpload(ctx, in)
	c.s.release()
	if err != nil {
		return translate(err)
	}
	err = c.uploadParts(ctx, aws.ToString(up.UploadId))
	if err != nil {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		_, _ = c.s.cli.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: &c.s.cfg.Bucket, Key: &c.key, UploadId: up.UploadId})
		cancel()
	}
	return err
}

func (c *serverCopy) uploadParts(ctx context.Context, upload string) error {
	var parts []types.CompletedPart
	size := max(c.s.cfg.PartSize, minPartSize)
	for off, n := int64(0), int32(1); off < c.size; off, n = off+size, n+1 {
		end := min(off+size, c.size) - 1
		if err := c.s.acquire(ctx); err != nil {
			return err
		}
		out, err := c.s.cli.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: &c.s.cfg.Bucket, Key: &c.key, UploadId: &upload,
			PartNumber: aws.Int32(n), CopySource: &c.source, CopySourceRange: aws.String(fmt.Sprintf("bytes=%d-%d", off, end))})
		c.s.release()
		if err != nil {
			return fmt.Errorf("copy part %d: %w", n, translate(err))
		}
		if out.CopyPartResult == nil {
			return fmt.Errorf("copy part %d: the service returned no part result", n)
		}
		parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(n), ETag: out.CopyPartResult.ETag})
	}
	if err := c.s.acquire(ctx); err != nil {
		return err
	}
	defer c.s.release()
	_, err := c.s.cli.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &c.s.cfg.Bucket, Key: &c.key, UploadId: &upload,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	return translate(err)
}
