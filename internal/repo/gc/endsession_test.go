package gc_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/gc"
	"github.com/coffer-backup/coffer/internal/store"
)

// storeUnindexed stores data's chunks in packs of w's session and commits
// the packs without indexing them: a backup cut short before its point's
// commit. It returns the chunks' IDs.
func storeUnindexed(t *testing.T, w *repo.Writer, data []byte) []id.ID {
	t.Helper()
	ctx := context.Background()
	r := w.Repository()
	enc, err := r.NewEncoder()
	if err != nil {
		t.Fatal(err)
	}
	h, st := r.Key().NewHasher(), w.NewStream()
	var deps []*repo.Pending
	var ids []id.ID
	for off, cs := 0, r.Config().ChunkSize; off < len(data); off += cs {
		chunk := data[off:min(off+cs, len(data))]
		x := h.Sum(chunk)
		p, owner, err := w.Claim(ctx, x)
		if err != nil {
			t.Fatal(err)
		}
		if owner {
			sealed, _ := enc.Encode(nil, chunk)
			if err := st.Add(ctx, x, sealed, len(chunk), p); err != nil {
				t.Fatal(err)
			}
		}
		if p != nil {
			deps = append(deps, p)
		}
		ids = append(ids, x)
	}
	if err := st.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Sync(ctx, deps); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestEndedSessionIsAdoptedAtOnce: the packs of a session ended by
// another process (a fleet leader giving up on a worker) are indexed at
// once, so that the next writer stores none of their chunks again, and
// the session's holder, which in fact still runs, loses its lease at its
// next refresh and stops.
func TestEndedSessionIsAdoptedAtOnce(t *testing.T) {
	r, _ := setup(t)
	ctx := context.Background()
	ttl := 400 * time.Millisecond
	holderRepo, err := repo.Open(ctx, r.Store(), []byte("pw"), repo.Options{LeaseTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	w, err := holderRepo.NewWriterFor(ctx, "worker kvm1 epoch 3", "cut short")
	if err != nil {
		t.Fatal(err)
	}
	ids := storeUnindexed(t, w, randomBytes(3<<20))
	retryRepo, err := repo.Open(ctx, r.Store(), []byte("pw"), repo.Options{})
	if err != nil {
		t.Fatal(err)
	}

	if n, chunks, err := r.EndSessionsOf(ctx, "worker kvm1 epoch 2"); err != nil || n != 0 || chunks != 0 {
		t.Fatalf("another registration's sessions: %d (%d chunks), %v", n, chunks, err)
	}
	n, chunks, err := r.EndSessionsOf(ctx, "worker kvm1 epoch 3")
	if err != nil || n != 1 || chunks != len(ids) {
		t.Fatalf("ended %d sessions, %d chunks indexed, %v; want 1, %d", n, chunks, err, len(ids))
	}
	leases, err := r.Leases(ctx)
	if err != nil || len(leases) != 1 || leases[0].Ended.IsZero() || leases[0].Owner != "worker kvm1 epoch 3" {
		t.Fatalf("the ended session's lease: %+v, %v", leases, err)
	}

	// The next writer, in another process that opened the repository
	// before the end, finds every chunk indexed: a writer refreshes its
	// index once its lease is written.
	retry, err := retryRepo.NewWriter(ctx, "retry")
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ids {
		if p, _, err := retry.Claim(ctx, x); err != nil || p != nil {
			t.Fatalf("chunk %s of the ended session is stored again (%v)", x.Short(), err)
		}
	}
	if err := retry.Close(ctx); err != nil {
		t.Fatal(err)
	}

	// The holder's next refresh finds its lease rewritten: it stops.
	for deadline := time.Now().Add(20 * ttl); !errors.Is(w.Err(), repo.ErrLeaseLost); {
		if time.Now().After(deadline) {
			t.Fatalf("the ended session's holder still writes %s after the end: %v", 20*ttl, w.Err())
		}
		time.Sleep(ttl / 8) // a poll's pace, not a synchronisation
	}
	_ = w.Close(ctx)
	mustVerify(t, r)
}

// TestEndedSessionThatStillCommitsIsKept: a session ended while its
// holder in fact still runs, and commits a point that deduplicates against
// garbage (a point deleted meanwhile). Garbage collection, planned after
// the end, must still wait for the holder and then keep what the point
// uses: ending a session declares its work adopted, not its holder gone.
func TestEndedSessionThatStillCommitsIsKept(t *testing.T) {
	r, dir := setup(t)
	ctx := context.Background()
	data := randomBytes(3 << 20)
	img := filepath.Join(dir, "a.img")
	image(t, img, data)
	old := backupFile(t, r, nil, img, "a")
	if err := r.DeletePoint(ctx, old); err != nil { // its chunks are now garbage
		t.Fatal(err)
	}
	garbage := countPacks(t, r)
	holderRepo, err := repo.Open(ctx, r.Store(), []byte("pw"), repo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := holderRepo.NewWriterFor(ctx, "worker kvm1 epoch 3", "fenced, still running")
	if err != nil {
		t.Fatal(err)
	}
	cut := randomBytes(1 << 20)
	storeUnindexed(t, w, cut)
	if n, _, err := r.EndSessionsOf(ctx, "worker kvm1 epoch 3"); err != nil || n != 1 {
		t.Fatalf("ended %d sessions: %v", n, err)
	}

	gcRepo, err := repo.Open(ctx, r.Store(), []byte("pw"), repo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := gc.Run(ctx, gcRepo, gc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Deferred || rep.PacksPlanned == 0 {
		t.Fatalf("gc did not wait for the ended session's holder: %+v", rep)
	}
	// Its packs are garbage too, but kept while its lease lives: the holder
	// indexes them again when it commits, after this plan.
	if rep.PacksPlanned != garbage {
		t.Fatalf("gc plans to delete %d packs, want the %d of the deleted point (the live session's kept)", rep.PacksPlanned, garbage)
	}
	// The holder commits late (its last refresh was recent enough that its
	// commit does not check the lease), deduplicating against the garbage.
	s := backupFile(t, r, w, img, "a")
	rep, err = gc.Run(ctx, gcRepo, gc.Options{})
	if err != nil || !rep.Deferred {
		t.Fatalf("gc while the ended session's lease lives: %+v, %v", rep, err)
	}
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rep, err = gc.Run(ctx, gcRepo, gc.Options{})
	if want := len(data) / r.Config().ChunkSize; err != nil || rep.Deferred || rep.ChunksRescued != want {
		t.Fatalf("after the holder ended: %+v, %v; want %d chunks rescued", rep, err, want)
	}
	mustVerify(t, r)
	checkRestores(t, r, s, data, dir)

	// The holder indexed its packs again at its commit: a backup that
	// deduplicates against them finds them all there.
	img = filepath.Join(dir, "b.img")
	image(t, img, cut)
	b := backupFile(t, r, nil, img, "b")
	mustVerify(t, r)
	checkRestores(t, r, b, cut, dir)
}

func countPacks(t *testing.T, r *repo.Repository) int {
	t.Helper()
	n := 0
	if err := r.Store().List(context.Background(), "data/", func(store.ObjectInfo) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}
