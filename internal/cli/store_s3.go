package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/cache"
	s3store "github.com/coffer-backup/coffer/internal/store/s3"
)

// openS3Store opens an s3://bucket/prefix location with the s3.* settings
// (flag > environment > file > default). Credentials not given in
// s3.access-key-id / s3.secret-access-key come from the AWS chain
// (AWS_ACCESS_KEY_ID..., AWS_PROFILE, ~/.aws/credentials, roles).
//
// A location may carry its own endpoint, region, path style and AWS
// profile as query parameters, so that `coffer copy` can join two S3
// services: s3://bucket/prefix?endpoint=https://host:9000&path-style=true&profile=offsite
// (they override the s3.* settings for that location only).
func openS3Store(ctx context.Context, a *app, location string) (store.Store, error) {
	base, query, _ := strings.Cut(location, "?")
	bucket, prefix, err := s3store.ParseLocation(base)
	if err != nil {
		return nil, usageError{err}
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, usagef("%s: %v", location, err)
	}
	for k := range q {
		if k != "endpoint" && k != "region" && k != "path-style" && k != "profile" {
			return nil, usagef("%s: unknown parameter %q (endpoint, region, path-style, profile)", location, k)
		}
	}
	setting := func(param, key string) string {
		if v := q.Get(param); v != "" {
			return v
		}
		return a.res.String(key)
	}
	pathStyle, err := a.res.Bool("s3.path-style")
	if err != nil {
		return nil, usageError{err}
	}
	if v := q.Get("path-style"); v != "" {
		if pathStyle, err = strconv.ParseBool(v); err != nil {
			return nil, usagef("%s: path-style=%q is not true or false", location, v)
		}
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
		Endpoint: setting("endpoint", "s3.endpoint"), Region: setting("region", "s3.region"), PathStyle: pathStyle,
		Profile:     q.Get("profile"),
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
