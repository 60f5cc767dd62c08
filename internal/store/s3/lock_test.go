package s3_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/coffer-backup/coffer/internal/store"
	s3store "github.com/coffer-backup/coffer/internal/store/s3"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestObjectLockHoldsAtTheServer proves immutability with the server's own
// API, bypassing coffer: the locked version can neither be deleted nor
// have its retention shortened, and an overwrite leaves it intact.
func TestObjectLockHoldsAtTheServer(t *testing.T) {
	objectLockHolds(t, testutil.StartS3(t))
}

func TestObjectLockHoldsAtTheServerSeaweedFS(t *testing.T) {
	objectLockHolds(t, testutil.StartSeaweedFS(t))
}

func objectLockHolds(t *testing.T, srv *testutil.S3Server) {
	ctx := context.Background()
	for _, mode := range []string{"compliance", "governance"} {
		t.Run(mode, func(t *testing.T) {
			bucket := srv.Bucket(t, true)
			s, err := s3store.Open(ctx, s3store.Config{Bucket: bucket, Prefix: "repo", Endpoint: srv.Endpoint, PathStyle: true,
				AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, LockMode: mode})
			if err != nil {
				t.Fatal(err)
			}
			until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
			if _, err := store.Put(ctx, s, "snapshots/locked", []byte("backup manifest"), store.PutOptions{RetainUntil: until}); err != nil {
				t.Fatal(err)
			}
			fi, err := s.Stat(ctx, "snapshots/locked")
			if err != nil || !fi.RetainUntil.Equal(until) {
				t.Fatalf("stat: retain until %v (%v), want %v", fi.RetainUntil, err, until)
			}
			// coffer refuses without asking the server to delete.
			if err := s.Delete(ctx, "snapshots/locked"); !errors.Is(err, store.ErrRetained) {
				t.Fatalf("delete of a locked object: %v, want ErrRetained", err)
			}
			cli, key := srv.Client(), "repo/snapshots/locked"
			head, err := cli.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
			if err != nil {
				t.Fatal(err)
			}
			if string(head.ObjectLockMode) != strings.ToUpper(mode) {
				t.Fatalf("lock mode %q, want %s", head.ObjectLockMode, mode)
			}
			ver := head.VersionId
			// The server itself refuses to delete the version...
			if _, err := cli.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: &key, VersionId: ver}); err == nil {
				t.Fatal("the server deleted a locked version")
			}
			// ...and to shorten its retention.
			short := time.Now().Add(time.Minute).UTC()
			_, err = cli.PutObjectRetention(ctx, &s3.PutObjectRetentionInput{Bucket: &bucket, Key: &key, VersionId: ver,
				Retention: &types.ObjectLockRetention{Mode: types.ObjectLockRetentionMode(strings.ToUpper(mode)), RetainUntilDate: &short}})
			if err == nil {
				t.Fatal("the server shortened a retention")
			}
			// An overwrite (or a plain delete) only stacks a newer version on
			// top; the locked bytes stay readable by version.
			if _, err := cli.PutObject(ctx, &s3.PutObjectInput{Bucket: &bucket, Key: &key, Body: strings.NewReader("ransom")}); err != nil {
				t.Fatalf("overwrite: %v", err)
			}
			if _, err := cli.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &bucket, Key: &key}); err != nil {
				t.Fatalf("delete marker: %v", err)
			}
			got, err := cli.GetObject(ctx, &s3.GetObjectInput{Bucket: &bucket, Key: &key, VersionId: ver})
			if err != nil {
				t.Fatalf("locked version after overwrite and delete: %v", err)
			}
			b, _ := io.ReadAll(got.Body)
			got.Body.Close()
			if !bytes.Equal(b, []byte("backup manifest")) {
				t.Fatalf("locked version reads %q", b)
			}
			// Retention only grows through coffer.
			later := until.Add(24 * time.Hour)
			if err := s.ExtendRetention(ctx, "snapshots/locked-missing", later); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("extend a missing object: %v", err)
			}
			ret, err := cli.GetObjectRetention(ctx, &s3.GetObjectRetentionInput{Bucket: &bucket, Key: &key, VersionId: ver})
			if err != nil || !aws.ToTime(ret.Retention.RetainUntilDate).Equal(until) {
				t.Fatalf("retention of the locked version: %+v %v, want %v", ret, err, until)
			}
		})
	}
}

func TestExtendRetention(t *testing.T) {
	srv := testutil.StartS3(t)
	ctx := context.Background()
	s := open(t, srv, true, "")
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	if _, err := store.Put(ctx, s, "data/p1", []byte("pack"), store.PutOptions{RetainUntil: until}); err != nil {
		t.Fatal(err)
	}
	later := until.Add(48 * time.Hour)
	if err := s.ExtendRetention(ctx, "data/p1", later); err != nil {
		t.Fatal(err)
	}
	if err := s.ExtendRetention(ctx, "data/p1", until); err != nil { // shorter: no-op
		t.Fatal(err)
	}
	fi, err := s.Stat(ctx, "data/p1")
	if err != nil || !fi.RetainUntil.Equal(later) {
		t.Fatalf("retention %v (%v), want %v", fi.RetainUntil, err, later)
	}
	// An unlocked object in the same bucket is deleted for real: no
	// version is left behind.
	if _, err := store.Put(ctx, s, "locks/l1", []byte("a"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, s, "locks/l1", []byte("b"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "locks/l1"); err != nil {
		t.Fatal(err)
	}
	bucket := bucketOf(s)
	out, err := srv.Client().ListObjectVersions(ctx, &s3.ListObjectVersionsInput{Bucket: &bucket, Prefix: aws.String("locks/")})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(out.Versions) + len(out.DeleteMarkers); n != 0 {
		t.Fatalf("%d versions left after delete", n)
	}
}

func bucketOf(s *s3store.Store) string {
	return strings.TrimPrefix(strings.SplitN(s.Properties().Location, "/", 4)[2], "")
}

// TestPermanentErrorsAreImmediate: a missing bucket and bad credentials are
// reported at open with a message that names the problem, without the
// retries that transient errors get: each open sends exactly the requests
// it sends with retries turned off (MaxAttempts 1), counted by a proxy.
func TestPermanentErrorsAreImmediate(t *testing.T) {
	srv := testutil.StartS3(t)
	proxy := testutil.StartFaultProxy(t, srv.Endpoint, 1) // no faults: counts requests
	ctx := context.Background()
	bucket := srv.Bucket(t, false)
	for _, c := range []struct {
		name, bucket, key, secret string
		is                        error
		says                      string
	}{
		{"missing bucket", "no-such-bucket", srv.AccessKey, srv.SecretKey, store.ErrNotFound, "does not exist"},
		{"bad secret", bucket, srv.AccessKey, "wrong", store.ErrPermission, "credentials"},
		{"unknown key", bucket, "nobody", "wrong", store.ErrPermission, ""},
	} {
		requests := map[int]int64{}
		for _, attempts := range []int{1, s3store.DefaultMaxAttempts} {
			before := proxy.Count()
			_, err := s3store.Open(ctx, s3store.Config{Bucket: c.bucket, Endpoint: proxy.URL, PathStyle: true,
				AccessKeyID: c.key, SecretAccessKey: c.secret, MaxAttempts: attempts})
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.says) {
				t.Fatalf("%s (%d attempts): %v", c.name, attempts, err)
			}
			requests[attempts] = proxy.Count() - before
		}
		if requests[1] == 0 || requests[s3store.DefaultMaxAttempts] != requests[1] {
			t.Errorf("%s: %d requests with retries, %d without: a permanent error was retried", c.name, requests[s3store.DefaultMaxAttempts], requests[1])
		}
	}
}

// TestRemoveLeftovers: a writer that dies mid-upload leaves an incomplete
// multipart upload; the janitor aborts it once it is old enough.
func TestRemoveLeftovers(t *testing.T) {
	srv := testutil.StartS3(t)
	ctx := context.Background()
	s := open(t, srv, false, "repo")
	w, err := s.Create(ctx, "data/dying", store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, 6<<20)); err != nil { // past one 5 MiB part
		t.Fatal(err)
	}
	// The writer is abandoned, as by kill -9.
	if n, err := s.RemoveLeftovers(ctx, time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("a young upload was removed: %d, %v", n, err)
	}
	if n, err := s.RemoveLeftovers(ctx, time.Now().Add(time.Minute)); err != nil || n != 1 {
		t.Fatalf("removed %d leftovers (%v), want 1", n, err)
	}
	bucket := bucketOf(s)
	out, err := srv.Client().ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &bucket})
	if err != nil || len(out.Uploads) != 0 {
		t.Fatalf("uploads left: %v %v", out, err)
	}
}
