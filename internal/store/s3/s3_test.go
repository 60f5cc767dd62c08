package s3_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/store"
	s3store "github.com/coffer-backup/coffer/internal/store/s3"
	"github.com/coffer-backup/coffer/internal/store/storetest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// open opens a store on a fresh bucket of srv. A 5 MiB part size (S3's
// minimum) makes the suite's 40 MiB object a real multipart upload.
func open(t *testing.T, srv *testutil.S3Server, objectLock bool, prefix string) *s3store.Store {
	t.Helper()
	s, err := s3store.Open(context.Background(), s3store.Config{
		Bucket: srv.Bucket(t, objectLock), Prefix: prefix, Endpoint: srv.Endpoint, PathStyle: true,
		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, PartSize: 5 << 20, LockMode: "governance",
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	conformance(t, testutil.StartS3(t))
}

// TestConformanceSeaweedFS runs the same suite against a second,
// independent S3 implementation.
func TestConformanceSeaweedFS(t *testing.T) {
	conformance(t, testutil.StartSeaweedFS(t))
}

func conformance(t *testing.T, srv *testutil.S3Server) {
	for _, tc := range []struct {
		name   string
		lock   bool
		prefix string
	}{{"plain", false, ""}, {"objectlock", true, "site-a/repo"}} {
		t.Run(tc.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) store.Store {
				s := open(t, srv, tc.lock, tc.prefix)
				p := s.Properties()
				if !p.ConditionalWrites || !p.Remote || p.Retention != tc.lock {
					t.Fatalf("properties %+v: conditional writes, remote and retention=%v expected", p, tc.lock)
				}
				return s
			})
		})
	}
}

// TestConformanceUnderFaults runs the suite through a proxy that throttles,
// resets connections before and after the server acted, cuts response
// bodies and delays requests: retries, resumed reads and the write-token
// check must hide all of it.
func TestConformanceUnderFaults(t *testing.T) {
	srv := testutil.StartS3(t)
	proxy := testutil.StartFaultProxy(t, srv.Endpoint, 42)
	storetest.Run(t, func(t *testing.T) store.Store {
		proxy.SetFaults(testutil.Faults{})
		s, err := s3store.Open(context.Background(), s3store.Config{
			Bucket: srv.Bucket(t, true), Endpoint: proxy.URL, PathStyle: true,
			AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, PartSize: 5 << 20,
		})
		if err != nil {
			t.Fatal(err)
		}
		proxy.SetFaults(testutil.Faults{SlowDown: 0.05, ResetBefore: 0.03, ResetAfter: 0.03, CutBody: 0.03,
			Delay: 0.05, DelayFor: 50 * time.Millisecond})
		return s
	})
	if proxy.Injected.Load() == 0 {
		t.Fatal("no fault was injected")
	}
	t.Logf("%d faults injected in %d requests", proxy.Injected.Load(), proxy.Count())
}

// TestConditionFallback: with the server's conditions switched off (as on
// servers that ignore If-None-Match), the emulation still refuses a create
// over an existing object and a stale compare-and-swap.
func TestConditionFallback(t *testing.T) {
	srv := testutil.StartS3(t)
	ctx := context.Background()
	s, err := s3store.Open(ctx, s3store.Config{Bucket: srv.Bucket(t, false), Endpoint: srv.Endpoint, PathStyle: true,
		AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, NoConditionalWrites: true})
	if err != nil {
		t.Fatal(err)
	}
	if s.Properties().ConditionalWrites {
		t.Fatal("conditional writes reported although switched off")
	}
	if _, err := store.Put(ctx, s, "locks/maintenance", []byte("a"), store.PutOptions{IfNotExists: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, s, "locks/maintenance", []byte("b"), store.PutOptions{IfNotExists: true}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	v1, err := s.Stat(ctx, "locks/maintenance")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Put(ctx, s, "locks/maintenance", []byte("c"), store.PutOptions{IfMatch: v1.Version}); err != nil {
		t.Fatalf("matching swap: %v", err)
	}
	if _, err := store.Put(ctx, s, "locks/maintenance", []byte("d"), store.PutOptions{IfMatch: v1.Version}); !errors.Is(err, store.ErrPreconditionFailed) {
		t.Fatalf("stale swap: %v, want ErrPreconditionFailed", err)
	}
	if b, _ := store.Get(ctx, s, "locks/maintenance", 0, -1); string(b) != "c" {
		t.Fatalf("content %q, want c", b)
	}
}
