// Package s3 is the store backend for a repository in an S3 bucket (AWS or
// any S3-compatible server), under an optional key prefix.
//
// How the store contract maps onto S3:
//
//   - Atomic visibility: an object is one PutObject, or a multipart upload
//     that only appears when CompleteMultipartUpload succeeds; a writer that
//     dies leaves at most an incomplete upload, which is never listed (a
//     bucket lifecycle rule, or `AbortIncompleteUploads`, removes it).
//   - Retries: the SDK retries throttling (503 SlowDown) and transient errors
//     with capped exponential backoff and full jitter; a body is always a
//     seekable buffer, so a retried request resends the same bytes. Reads
//     resume where a dropped connection stopped (pinned to the ETag).
//   - Conditions: IfNotExists is If-None-Match: *, IfMatch is If-Match on the
//     ETag, both on PutObject and CompleteMultipartUpload. Support is probed
//     when the store is opened (see probeConditional); servers that ignore
//     the headers are reported with ConditionalWrites == false.
//   - A conditional write whose response is lost and whose retry then fails
//     with 412 may have won after all: every object carries a random write
//     token in its metadata, and a 412 is checked against it before being
//     reported.
//   - Retention: on a bucket with Object Lock, PutOptions.RetainUntil becomes
//     the object's retention (mode from Config.LockMode) and ExtendRetention
//     calls PutObjectRetention. Delete never asks the server to remove an
//     object whose retention has not ended; it reports store.ErrRetained.
//   - Versioned buckets (Object Lock implies versioning): Delete removes
//     every version of the key, oldest first, so space is really freed and
//     the current version stays readable until the last step.
package s3

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/logging"

	"github.com/coffer-backup/coffer/internal/store"
)

// Defaults for Config fields left zero.
const (
	DefaultConnections = 8
	DefaultPartSize    = 16 << 20
	DefaultMaxAttempts = 10
	minPartSize        = 5 << 20 // S3's minimum for every part but the last
	probeName          = ".coffer-probe"
)

// Config describes how to reach a bucket. Credentials left empty come from
// the AWS default chain: AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY/
// AWS_SESSION_TOKEN, AWS_PROFILE with ~/.aws/config and ~/.aws/credentials,
// web identity, container and instance roles.
type Config struct {
	Bucket    string
	Prefix    string // key prefix, without leading or trailing slash
	Endpoint  string // e.g. https://s3.example.net:9000; empty means AWS
	Region    string // default from the AWS chain, else us-east-1
	PathStyle bool

	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string

	Profile string // AWS shared-config profile; empty means AWS_PROFILE or default

	CAFile string // PEM bundle trusted in addition to the system roots

	Connections int   // parallel requests (and HTTP connections)
	PartSize    int64 // multipart part size; objects up to it are one PUT
	// MaxCopySize is the largest object a server-side copy (CopyFrom)
	// makes with one CopyObject; larger ones are copied in parts of
	// PartSize. Zero means S3's limit, 5 GiB.
	MaxCopySize int64
	MaxAttempts int // attempts per request, including the first

	// NoConditionalWrites skips the probe and uses the fallback protocol
	// (see cond.go), for servers that accept the headers but are known not
	// to enforce them atomically.
	NoConditionalWrites bool

	// LockMode is the Object Lock mode of retained objects: "COMPLIANCE"
	// (default: nobody can shorten or remove it) or "GOVERNANCE" (users
	// with s3:BypassGovernanceRetention can).
	LockMode string

	Logger *slog.Logger
	// HTTPClient replaces the default client (tests, fault injection).
	HTTPClient *http.Client
}

// ParseLocation splits s3://bucket/prefix.
func ParseLocation(loc string) (bucket, prefix string, err error) {
	rest, ok := strings.CutPrefix(loc, "s3://")
	if !ok {
		return "", "", fmt.Errorf("%q is not an s3://bucket/prefix location", loc)
	}
	rest, _, _ = strings.Cut(rest, "?") // per-location parameters are the caller's
	bucket, prefix, _ = strings.Cut(rest, "/")
	prefix = strings.Trim(prefix, "/")
	if bucket == "" {
		return "", "", fmt.Errorf("%q names no bucket (s3://bucket/prefix)", loc)
	}
	return bucket, prefix, nil
}

// Store is a bucket prefix.
type Store struct {
	cli       *s3.Client
	cfg       Config
	prefix    string // "" or "prefix/"
	log       *slog.Logger
	sem       chan struct{} // bounds requests in flight across all callers
	cond      bool          // conditional writes enforced by the server
	retention bool          // bucket has Object Lock enabled
	versioned bool          // bucket keeps versions (Delete must remove them all)
	lockMode  types.ObjectLockMode
}

var (
	_ store.Store    = (*Store)(nil)
	_ store.Retainer = (*Store)(nil)
)

// Open connects to the bucket, checks access and detects what the server
// supports. Missing buckets, bad credentials and denied access are reported
// here, once, with a message that says which.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" {
		return nil, errors.New("s3: no bucket given")
	}
	if cfg.Connections <= 0 {
		cfg.Connections = DefaultConnections
	}
	if cfg.PartSize == 0 {
		cfg.PartSize = DefaultPartSize
	}
	if cfg.PartSize < minPartSize {
		return nil, fmt.Errorf("s3: part size %d is below S3's minimum of 5 MiB", cfg.PartSize)
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	mode := types.ObjectLockModeCompliance
	switch strings.ToUpper(cfg.LockMode) {
	case "", "COMPLIANCE":
	case "GOVERNANCE":
		mode = types.ObjectLockModeGovernance
	default:
		return nil, fmt.Errorf("s3: lock mode %q: use compliance or governance", cfg.LockMode)
	}
	cli, err := newClient(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s := &Store{cli: cli, cfg: cfg, log: cfg.Logger, sem: make(chan struct{}, cfg.Connections), lockMode: mode}
	if cfg.Prefix != "" {
		s.prefix = strings.Trim(cfg.Prefix, "/") + "/"
	}
	if err := s.detect(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func newClient(ctx context.Context, cfg Config) (*s3.Client, error) {
	var hc aws.HTTPClient = cfg.HTTPClient
	if cfg.HTTPClient == nil {
		var caErr error
		// A BuildableClient (not a plain *http.Client) lets the SDK add
		// AWS_CA_BUNDLE's certificates to the same transport.
		hc = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			// Requests are bounded by the store's semaphore, not here: a
			// connection limit would also count response bodies a caller
			// still holds open and could deadlock it.
			tr.MaxIdleConnsPerHost = cfg.Connections * 2
			tr.DialContext = (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext
			tr.ResponseHeaderTimeout = 2 * time.Minute
			if cfg.CAFile != "" {
				pool, err := caPool(cfg.CAFile)
				if err != nil {
					caErr = err
					return
				}
				tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
			}
		})
		// The options run lazily: build once now to report a bad CA file.
		_ = hc.(*awshttp.BuildableClient).GetTransport()
		if caErr != nil {
			return nil, caErr
		}
	}
	opts := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithHTTPClient(hc),
		// The SDK logs (at debug and warn) that ranged responses carry no
		// checksum to validate; coffer authenticates every object itself.
		awsconfig.WithLogger(logging.Nop{}),
		awsconfig.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = cfg.MaxAttempts
				o.MaxBackoff = 20 * time.Second
				// The client-side retry quota gives up after a burst of
				// failures; a backup must ride out a long throttling
				// episode instead, so only backoff limits the rate.
				o.RateLimiter = ratelimit.None
				o.Retryables = append(o.Retryables, retry.RetryableErrorCode{
					Codes: map[string]struct{}{"SlowDown": {}, "InternalError": {}, "ServiceUnavailable": {}},
				})
			})
		}),
	}
	if cfg.Region != "" {
		opts = append(opts, awsconfig.WithRegion(cfg.Region))
	}
	if cfg.Profile != "" {
		opts = append(opts, awsconfig.WithSharedConfigProfile(cfg.Profile))
	}
	if cfg.AccessKeyID != "" {
		opts = append(opts, awsconfig.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)))
	}
	ac, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3: load AWS configuration: %w", err)
	}
	if ac.Region == "" {
		ac.Region = "us-east-1" // self-hosted servers accept any region
	}
	return s3.NewFromConfig(ac, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
	}), nil
}

// caPool is the system roots plus the PEM certificates of file.
func caPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("s3: CA file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("s3: CA file %s holds no PEM certificate", file)
	}
	return pool, nil
}

// detect checks access and probes the bucket's features. Every probe is a
// cheap request; after the first open the conditional-write probe costs one
// request (its marker object already exists).
func (s *Store) detect(ctx context.Context) error {
	_, err := s.cli.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &s.cfg.Bucket, Prefix: aws.String(s.prefix), MaxKeys: aws.Int32(1)})
	if err != nil {
		return s.openError(err)
	}
	lock, err := s.cli.GetObjectLockConfiguration(ctx, &s3.GetObjectLockConfigurationInput{Bucket: &s.cfg.Bucket})
	switch {
	case err == nil:
		s.retention = lock.ObjectLockConfiguration != nil && lock.ObjectLockConfiguration.ObjectLockEnabled == types.ObjectLockEnabledEnabled
	case errorCode(err) == "ObjectLockConfigurationNotFoundError":
	default:
		s.log.Warn("cannot read the bucket's Object Lock configuration; immutability is off", "bucket", s.cfg.Bucket, "err", err)
	}
	s.versioned = s.retention
	if v, err := s.cli.GetBucketVersioning(ctx, &s3.GetBucketVersioningInput{Bucket: &s.cfg.Bucket}); err == nil {
		s.versioned = s.versioned || v.Status != ""
	} else {
		// Without knowing, assume versions exist: Delete then lists them,
		// which costs a request but never leaves old versions behind.
		s.versioned = true
	}
	if s.cfg.NoConditionalWrites {
		return nil
	}
	s.cond, err = s.probeConditional(ctx)
	return err
}

// openError turns the first request's failure into a message that says what
// is wrong with the location or the credentials.
func (s *Store) openError(err error) error {
	loc := s.Properties().Location
	switch errorCode(err) {
	case "NoSuchBucket":
		return fmt.Errorf("%w: bucket %q does not exist at %s (create it first, with Object Lock if backups must be immutable)", store.ErrNotFound, s.cfg.Bucket, s.endpoint())
	case "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidToken", "ExpiredToken", "InvalidClientTokenId",
		"XAdminUserNotFound": // versitygw's name for an unknown access key
		return fmt.Errorf("%w: the S3 credentials were rejected by %s (%s): check the access key and secret", store.ErrPermission, s.endpoint(), errorCode(err))
	case "AccessDenied", "Forbidden", "AllAccessDisabled":
		return fmt.Errorf("%w: the S3 credentials may not list %s: %v", store.ErrPermission, loc, err)
	}
	var ce *aws.RequestCanceledError
	if errors.As(err, &ce) {
		return err
	}
	return fmt.Errorf("s3: cannot reach %s at %s: %w", loc, s.endpoint(), translate(err))
}

func (s *Store) endpoint() string {
	if s.cfg.Endpoint != "" {
		return s.cfg.Endpoint
	}
	return "AWS S3"
}

// Properties implements store.Store.
func (s *Store) Properties() store.Properties {
	loc := "s3://" + s.cfg.Bucket
	if p := strings.TrimSuffix(s.prefix, "/"); p != "" {
		loc += "/" + p
	}
	return store.Properties{Location: loc, Connections: s.cfg.Connections, ConditionalWrites: s.cond,
		Retention: s.retention, Remote: true}
}

// Close implements store.Store.
func (s *Store) Close() error {
	if c, ok := s.cli.Options().HTTPClient.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
	return nil
}

// key maps an object name to its S3 key.
func (s *Store) key(name string) (string, error) {
	if err := validName(name); err != nil {
		return "", err
	}
	return s.prefix + name, nil
}

// validName applies the store's name rules; a leading dot is refused so no
// name can reach the probe marker.
func validName(name string) error {
	if name == "" || strings.HasPrefix(name, "/") || strings.HasSuffix(name, "/") {
		return fmt.Errorf("invalid object name %q", name)
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == "" || seg[0] == '.' {
			return fmt.Errorf("invalid object name %q", name)
		}
		for _, c := range seg {
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
			if !ok {
				return fmt.Errorf("invalid object name %q", name)
			}
		}
	}
	return nil
}

// acquire takes one of the store's request slots.
func (s *Store) acquire(ctx context.Context) error {
	select {
	case s.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Store) release() { <-s.sem }
