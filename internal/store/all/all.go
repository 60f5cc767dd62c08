// Package all is the one registry of storage backends: it opens the
// storage at a repository location (a directory, s3://bucket/prefix),
// with the local metadata cache in front of a remote one. Every backend
// is named here explicitly, as restic's backend/all does: importing a
// backend registers nothing by side effect.
package all

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/cache"
	"github.com/coffer-backup/coffer/internal/store/local"
	s3store "github.com/coffer-backup/coffer/internal/store/s3"
)

// Config configures the storage backends.
type Config struct {
	S3         S3Config
	RepoServer RepoServerConfig
	// CacheDir holds the bounded local cache of a remote repository's
	// metadata (one directory per location); CacheMaxBytes 0 turns it
	// off, CacheMinFreeBytes keeps that much of its file system free.
	CacheDir          string
	CacheMaxBytes     int64
	CacheMinFreeBytes int64
}

// S3Config are the s3.* settings. Credentials left empty come from the AWS
// chain (environment, profile, web identity, instance roles).
type S3Config struct {
	Endpoint, Region string
	PathStyle        bool
	AccessKeyID      string
	SecretAccessKey  string
	// CAFile is trusted in addition to the system roots.
	CAFile      string
	Connections int
	// PartSizeBytes: larger objects are uploaded in parts of this size.
	PartSizeBytes int64
	// LockMode is the object lock mode: compliance or governance.
	LockMode string
	// ConditionalWrites is auto (probe the server) or off.
	ConditionalWrites string
}

// Open opens the storage at a repository location: a directory,
// s3://bucket/prefix, or https://host:port for a coffer repository server.
func Open(ctx context.Context, cfg Config, location string, log *slog.Logger) (store.Store, error) {
	switch {
	case location == "":
		return nil, invalidf("no repository given: use --repo, COFFER_REPO or `repository:` in the configuration file")
	case strings.HasPrefix(location, "s3://"):
		return openS3(ctx, cfg, location, log)
	case strings.HasPrefix(location, "https://"):
		return openRepoServer(ctx, cfg, location, log)
	case strings.Contains(location, "://"):
		return nil, invalidf("unsupported repository location %q (a directory, s3://bucket/prefix or https:// for a repository server)", location)
	}
	st, err := local.Open(location)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s does not exist (create one with `coffer init`)", repo.ErrNotRepository, location)
	}
	return st, err
}

// IsURL reports a location with a scheme (s3://...), as opposed to a
// directory.
func IsURL(location string) bool {
	for i := 0; i < len(location); i++ {
		if location[i] == ':' {
			return i+2 < len(location) && location[i+1] == '/' && location[i+2] == '/'
		}
		if location[i] == '/' {
			return false
		}
	}
	return false
}

func invalidf(format string, a ...any) error { return api.Errorf(api.Invalid, format, a...) }

// openS3 opens an s3://bucket/prefix location with the s3.* settings.
//
// A location may carry its own endpoint, region, path style and AWS
// profile as query parameters, so that `coffer copy` can join two S3
// services: s3://bucket/prefix?endpoint=https://host:9000&path-style=true&profile=offsite
// (they override the s3.* settings for that location only).
func openS3(ctx context.Context, cfg Config, location string, log *slog.Logger) (store.Store, error) {
	base, query, _ := strings.Cut(location, "?")
	bucket, prefix, err := s3store.ParseLocation(base)
	if err != nil {
		return nil, api.WithClass(api.Invalid, err)
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, invalidf("%s: %v", location, err)
	}
	for k := range q {
		if k != "endpoint" && k != "region" && k != "path-style" && k != "profile" {
			return nil, invalidf("%s: unknown parameter %q (endpoint, region, path-style, profile)", location, k)
		}
	}
	c := cfg.S3
	or := func(param, setting string) string {
		if v := q.Get(param); v != "" {
			return v
		}
		return setting
	}
	pathStyle := c.PathStyle
	if v := q.Get("path-style"); v != "" {
		if pathStyle, err = strconv.ParseBool(v); err != nil {
			return nil, invalidf("%s: path-style=%q is not true or false", location, v)
		}
	}
	if c.ConditionalWrites != "auto" && c.ConditionalWrites != "off" && c.ConditionalWrites != "" {
		return nil, invalidf("s3.conditional-writes: %q is neither auto nor off", c.ConditionalWrites)
	}
	switch c.LockMode {
	case "compliance", "governance", "":
	default:
		return nil, invalidf("s3.lock-mode: %q is neither compliance nor governance", c.LockMode)
	}
	if c.AccessKeyID != "" && c.SecretAccessKey == "" {
		return nil, invalidf("s3.access-key-id is set but s3.secret-access-key is not")
	}
	st, err := s3store.Open(ctx, s3store.Config{
		Bucket: bucket, Prefix: prefix,
		Endpoint: or("endpoint", c.Endpoint), Region: or("region", c.Region), PathStyle: pathStyle,
		Profile:     q.Get("profile"),
		AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey,
		CAFile: c.CAFile, Connections: c.Connections, PartSize: c.PartSizeBytes,
		LockMode: c.LockMode, NoConditionalWrites: c.ConditionalWrites == "off", Logger: log,
	})
	if err != nil {
		return nil, err
	}
	return withMetadataCache(cfg, st, location, log), nil
}

// withMetadataCache puts the bounded local metadata cache in front of a
// remote store, one directory per location under the cache directory.
func withMetadataCache(c Config, st store.Store, location string, log *slog.Logger) store.Store {
	if c.CacheMaxBytes == 0 {
		return st
	}
	h := sha256.Sum256([]byte(location))
	dir := filepath.Join(c.CacheDir, "repos", hex.EncodeToString(h[:8]))
	cached, err := cache.New(st, dir, cache.Options{MaxBytes: c.CacheMaxBytes, MinFree: c.CacheMinFreeBytes})
	if err != nil {
		log.Warn("metadata cache unavailable; reading metadata from the repository", "dir", dir, "err", err)
		return st
	}
	return cached
}
