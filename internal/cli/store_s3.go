package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"

	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/cache"
	s3store "github.com/coffer-backup/coffer/internal/store/s3"
)

// openS3Store opens an s3://bucket/prefix location with the s3.* settings
// (flag > environment > file > default). Credentials not given in
// s3.access-key-id / s3.secret-access-key come from the AWS chain
// (AWS_ACCESS_KEY_ID..., AWS_PROFILE, ~/.aws/credentials, roles).
func openS3Store(ctx context.Context, a *app, location string) (store.Store, error) {
	bucket, prefix, err := s3store.ParseLocation(location)
	if err != nil {
		return nil, usageError{err}
	}
	pathStyle, err := a.res.Bool("s3.path-style")
	if err != nil {
		return nil, usageError{err}
	}
	conns, err := a.res.Int("s3.connections")
	if err != nil {
		return nil, usageError{err}
	}
	part, err := parseSize(a.res.String("s3.part-size"))
	if err != nil {
		return nil, usagef("s3.part-size: %v", err)
	}
	cond := a.res.String("s3.conditional-writes")
	if cond != "auto" && cond != "off" {
		return nil, usagef("s3.conditional-writes: %q is neither auto nor off", cond)
	}
	switch mode := a.res.String("s3.lock-mode"); mode {
	case "compliance", "governance":
	default:
		return nil, usagef("s3.lock-mode: %q is neither compliance nor governance", mode)
	}
	cfg := s3store.Config{
		Bucket: bucket, Prefix: prefix,
		Endpoint: a.res.String("s3.endpoint"), Region: a.res.String("s3.region"), PathStyle: pathStyle,
		AccessKeyID: a.res.String("s3.access-key-id"), SecretAccessKey: a.res.String("s3.secret-access-key"),
		CAFile: a.res.Path("s3.ca-file"), Connections: conns, PartSize: part,
		LockMode: a.res.String("s3.lock-mode"), NoConditionalWrites: cond == "off", Logger: a.log,
	}
	if cfg.AccessKeyID != "" && cfg.SecretAccessKey == "" {
		return nil, usagef("s3.access-key-id is set but s3.secret-access-key is not")
	}
	st, err := s3store.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return a.withMetadataCache(st, location)
}

// withMetadataCache puts the bounded local metadata cache in front of a
// remote store, one directory per location under cache-dir.
func (a *app) withMetadataCache(st store.Store, location string) (store.Store, error) {
	maxSize, err := parseSize(a.res.String("cache-max-size"))
	if err != nil {
		return nil, usagef("cache-max-size: %v", err)
	}
	minFree, err := parseSize(a.res.String("cache-min-free"))
	if err != nil {
		return nil, usagef("cache-min-free: %v", err)
	}
	if maxSize == 0 {
		return st, nil
	}
	h := sha256.Sum256([]byte(location))
	dir := filepath.Join(a.res.Path("cache-dir"), "repos", hex.EncodeToString(h[:8]))
	c, err := cache.New(st, dir, cache.Options{MaxBytes: maxSize, MinFree: minFree})
	if err != nil {
		a.log.Warn("metadata cache unavailable; reading metadata from the repository", "dir", dir, "err", err)
		return st, nil
	}
	return c, nil
}
