package s3_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/store"
	s3store "github.com/coffer-backup/coffer/internal/store/s3"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestCopyFromServerSide copies objects between two buckets of one
// server: whole (CopyObject) and, past MaxCopySize, in parts
// (UploadPartCopy); the proxy in front of the server sees none of the
// payload. A locked target gets the lock asked for. A store on another
// service is refused with errors.ErrUnsupported, so the caller copies
// through the host.
func TestCopyFromServerSide(t *testing.T) {
	srv := testutil.StartS3(t)
	proxy := testutil.StartFaultProxy(t, srv.Endpoint, 7)
	ctx := context.Background()
	open := func(bucket, endpoint string) *s3store.Store {
		s, err := s3store.Open(ctx, s3store.Config{Bucket: bucket, Prefix: "repo", Endpoint: endpoint, PathStyle: true,
			AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, PartSize: 5 << 20, MaxCopySize: 6 << 20, LockMode: "governance"})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	src, dst := open(srv.Bucket(t, false), proxy.URL), open(srv.Bucket(t, true), proxy.URL)
	small, large := make([]byte, 3<<20), make([]byte, 13<<20) // large: parts of 5, 5 and 3 MiB
	_, _ = rand.Read(small)
	_, _ = rand.Read(large)
	for name, data := range map[string][]byte{"data/small": small, "data/large": large} {
		if _, err := store.Put(ctx, src, name, data, store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	until := time.Now().Add(time.Hour).Truncate(time.Second)
	for name, data := range map[string][]byte{"data/small": small, "data/large": large} {
		b0, posts := proxy.Bytes(), proxy.Count("POST")
		fi, m, err := dst.CopyFrom(ctx, src, name, name+"-copy", store.PutOptions{RetainUntil: until})
		if err != nil {
			t.Fatalf("copy %s: %v", name, err)
		}
		if through := proxy.Bytes() - b0; m != store.CopyServerSide || fi.Size != int64(len(data)) || through > 64<<10 {
			t.Fatalf("copy %s: method %s, %d bytes, %d bytes through the host", name, m, fi.Size, through)
		}
		// In parts: a multipart upload, started and completed by POSTs.
		if multipart := proxy.Count("POST") - posts; (name == "data/large") != (multipart == 2) {
			t.Fatalf("copy %s: %d POST requests", name, multipart)
		}
		got, err := store.Get(ctx, dst, name+"-copy", 0, -1)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("copy %s reads back different bytes (%v)", name, err)
		}
		st, err := dst.Stat(ctx, name+"-copy")
		if err != nil || st.RetainUntil.Before(until) {
			t.Fatalf("copy %s locked until %v (%v), want %v", name, st.RetainUntil, err, until)
		}
	}
	if _, _, err := dst.CopyFrom(ctx, src, "data/missing", "data/missing-copy", store.PutOptions{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("copy of a missing object: %v, want ErrNotFound", err)
	}
	elsewhere := open(srv.Bucket(t, false), srv.Endpoint) // same server, but reached at another endpoint
	if _, _, err := dst.CopyFrom(ctx, elsewhere, "data/small", "data/x", store.PutOptions{}); !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("copy from another service: %v, want errors.ErrUnsupported", err)
	}
}
