package s3

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/coffer-backup/coffer/internal/store"
)

// Delete implements store.Store. S3's DeleteObject succeeds on a missing
// key and, on a versioned bucket, only hides the object behind a delete
// marker; the store contract wants ErrNotFound for the first and real
// removal (and ErrRetained for a locked object) for the second. So Delete
// first looks at the object: a retention that has not ended is reported
// without asking the server to delete anything.
func (s *Store) Delete(ctx context.Context, name string) error {
	fi, err := s.Stat(ctx, name)
	if err != nil {
		return fmt.Errorf("delete: %w", err)
	}
	if fi.RetainUntil.After(time.Now()) {
		return fmt.Errorf("delete %s: locked until %s: %w", name, fi.RetainUntil.Format(time.RFC3339), store.ErrRetained)
	}
	key, _ := s.key(name)
	if !s.versioned {
		return s.deleteVersion(ctx, name, key, "")
	}
	versions, err := s.versions(ctx, key)
	if err != nil {
		return fmt.Errorf("delete %s: %w", name, err)
	}
	// Oldest first: until the last step the current version stays readable,
	// so a refusal half-way (an older version under retention) never leaves
	// the object hidden.
	for _, v := range versions {
		if err := s.deleteVersion(ctx, name, key, v); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) deleteVersion(ctx context.Context, name, key, version string) error {
	in := &s3.DeleteObjectInput{Bucket: &s.cfg.Bucket, Key: &key}
	if version != "" {
		in.VersionId = &version
	}
	if err := s.acquire(ctx); err != nil {
		return err
	}
	_, err := s.cli.DeleteObject(ctx, in)
	s.release()
	if err != nil {
		if s.retention && errorCode(err) == "AccessDenied" {
			// A delete refused on a lock-enabled bucket after the current
			// version was found unlocked: an older version is locked.
			return fmt.Errorf("delete %s: %w: %w", name, store.ErrRetained, err)
		}
		return fmt.Errorf("delete %s: %w", name, translate(err))
	}
	return nil
}

// versions lists every version and delete marker of exactly key, oldest
// first.
func (s *Store) versions(ctx context.Context, key string) ([]string, error) {
	all, err := s.listVersions(ctx, key)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, v := range all[key] {
		ids = append(ids, v.v.ID)
	}
	return ids, nil
}

// ExtendRetention implements store.Retainer: the object's current version
// is locked until at least until. S3 refuses to shorten a retention, and so
// does this method (an earlier until is a no-op).
func (s *Store) ExtendRetention(ctx context.Context, name string, until time.Time) error {
	if !s.retention {
		return nil
	}
	key, err := s.key(name)
	if err != nil {
		return err
	}
	fi, err := s.Stat(ctx, name)
	if err != nil {
		return fmt.Errorf("extend retention: %w", err)
	}
	if !fi.RetainUntil.Before(until) {
		return nil
	}
	u := until.UTC()
	if err := s.acquire(ctx); err != nil {
		return err
	}
	defer s.release()
	_, err = s.cli.PutObjectRetention(ctx, &s3.PutObjectRetentionInput{Bucket: &s.cfg.Bucket, Key: &key,
		Retention:         &types.ObjectLockRetention{Mode: types.ObjectLockRetentionMode(s.lockMode), RetainUntilDate: &u},
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c})
	if err != nil {
		return fmt.Errorf("extend retention of %s: %w", name, translate(err))
	}
	return nil
}

// RemoveLeftovers implements store.Janitor: it aborts multipart uploads
// under the prefix that were started before olderThan, which writers killed
// mid-upload leave behind (invisible, but billed).
func (s *Store) RemoveLeftovers(ctx context.Context, olderThan time.Time) (int, error) {
	n := 0
	in := &s3.ListMultipartUploadsInput{Bucket: &s.cfg.Bucket, Prefix: aws.String(s.prefix)}
	for {
		out, err := s.cli.ListMultipartUploads(ctx, in)
		if err != nil {
			return n, translate(err)
		}
		for _, u := range out.Uploads {
			if !aws.ToTime(u.Initiated).Before(olderThan) {
				continue
			}
			_, err := s.cli.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &s.cfg.Bucket, Key: u.Key, UploadId: u.UploadId})
			if err == nil {
				n++
			}
		}
		if !aws.ToBool(out.IsTruncated) {
			return n, nil
		}
		in.KeyMarker, in.UploadIdMarker = out.NextKeyMarker, out.NextUploadIdMarker
	}
}
