package repo_test

import (
	"context"
	"crypto/rand"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
	s3store "github.com/coffer-backup/coffer/internal/store/s3"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestConcurrentRetainNeverShortens: two processes (two repository
// handles, two write sessions) lock the same shared pack and the config
// and key files at once, for slightly different times, on a real Object
// Lock bucket. The server refuses to shorten a lock, so whichever extends
// second with the earlier time must accept the later lock instead of
// failing the backup; afterwards everything is locked until the later
// time.
func TestConcurrentRetainNeverShortens(t *testing.T) {
	srv := testutil.StartS3(t)
	ctx := context.Background()
	bucket := srv.Bucket(t, true)
	open := func() store.Store {
		st, err := s3store.Open(ctx, s3store.Config{Bucket: bucket, Prefix: "repo", Endpoint: srv.Endpoint, PathStyle: true,
			AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey, LockMode: "governance"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	kdf := &crypto.KDF{Algorithm: "argon2id", Time: 1, MemoryKiB: 8 << 10, Threads: 1, Salt: []byte("0123456789abcdef")}
	if _, err := repo.Init(ctx, open(), repo.InitOptions{Password: []byte("pw"), KDF: kdf}); err != nil {
		t.Fatal(err)
	}
	// One unlocked pack of a few chunks, written and indexed by a first
	// session, then shared by two more.
	r0, err := repo.Open(ctx, open(), []byte("pw"), repo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w0, err := r0.NewWriter(ctx, "unlocked backup")
	if err != nil {
		t.Fatal(err)
	}
	st := w0.NewStream()
	var ids []id.ID
	for range 4 {
		var x id.ID
		rand.Read(x[:])
		p, owner, err := w0.Claim(ctx, x)
		if err != nil || !owner {
			t.Fatalf("claim: %v %v", owner, err)
		}
		if err := st.Add(ctx, x, make([]byte, 100), 100, p); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, x)
	}
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w0.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var writers []*repo.Writer
	for range 2 {
		r, err := repo.Open(ctx, open(), []byte("pw"), repo.Options{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := r.NewWriter(ctx, "locked backup")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close(context.Background()) })
		writers = append(writers, w)
	}
	loc, found, err := writers[1].Repository().Index().Lookup(ctx, ids[0])
	if err != nil || !found {
		t.Fatalf("shared chunk not indexed: %v %v", found, err)
	}
	packName := pack.ObjectName(loc.Pack)

	base := time.Now().Add(time.Hour).Truncate(time.Second)
	for i := range 12 {
		// Each round asks for more than the previous round's lock and slack,
		// so both sessions really extend.
		early := base.Add(time.Duration(i) * 8 * 24 * time.Hour)
		late := early.Add(time.Second)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for k, until := range []time.Time{early, late} {
			wg.Go(func() { errs[k] = writers[k].Retain(ctx, ids, until) })
		}
		wg.Wait()
		for k, err := range errs {
			if err != nil {
				t.Fatalf("round %d, session %d: %v", i, k, err)
			}
		}
		fi, err := open().Stat(ctx, packName)
		if err != nil || fi.RetainUntil.Before(late) {
			t.Fatalf("round %d: pack locked until %v (%v), want at least %v", i, fi.RetainUntil, err, late)
		}
		cfg, err := open().Stat(ctx, "config")
		if err != nil || cfg.RetainUntil.Before(late) {
			t.Fatalf("round %d: config locked until %v (%v), want at least %v", i, cfg.RetainUntil, err, late)
		}
	}
}
