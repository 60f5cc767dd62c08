package repo

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
)

// Immutability: on a backend with retention (S3 Object Lock), a backup
// point that asks for it (Snapshot.RetainUntil) is made undeletable until
// then: its manifest, its disk maps and every pack holding one of its
// chunks. New packs are locked when written; packs shared with older
// points (deduplication) get their lock extended before the manifest is
// committed. Index segments are not locked: `coffer repair index` rebuilds
// them from packs, and garbage collection must be able to compact them.

// lockSlack is added to every lock so a pack shared by a daily chain is
// extended about once a week instead of on every backup.
const lockSlack = 7 * 24 * time.Hour

func lockUntil(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(lockSlack).UTC().Truncate(time.Second)
}

// lockLedger remembers the retention of packs seen in this process.
type lockLedger struct {
	mu    sync.Mutex
	until map[pack.ID]time.Time
}

// Retain makes sure every pack holding one of ids is locked until at least
// until. It is a no-op when until is zero or the backend has no retention.
func (w *Writer) Retain(ctx context.Context, ids []id.ID, until time.Time) error {
	rt, ok := w.r.st.(store.Retainer)
	if until.IsZero() || !ok || !w.r.st.Properties().Retention {
		return nil
	}
	need := until.UTC()
	packs := map[pack.ID]bool{}
	seen := map[id.ID]bool{}
	for _, x := range ids {
		if x.IsZero() || seen[x] {
			continue
		}
		seen[x] = true
		w.mu.Lock()
		p := w.pending[x]
		w.mu.Unlock()
		if p != nil && p.pack != nil {
			if !p.pack.stream.retain.Before(need) {
				continue // written by this session: locked at creation
			}
			// Written by a stream with a shorter lock: its commit may still
			// be in flight, and a pack can only be extended once it exists.
			select {
			case <-p.pack.done:
			case <-ctx.Done():
				return ctx.Err()
			}
			if p.pack.err != nil {
				return p.pack.err
			}
			packs[p.pack.id] = true
			continue
		}
		loc, found, err := w.r.Index().Lookup(ctx, x)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: %s", ErrChunkMissing, x.Short())
		}
		packs[loc.Pack] = true
	}
	for pid := range packs {
		if w.ledger.known(pid, need) {
			continue
		}
		fi, err := w.r.st.Stat(ctx, pack.ObjectName(pid))
		if err != nil {
			return fmt.Errorf("retention of pack %s: %w", pid, err)
		}
		if !fi.RetainUntil.Before(need) {
			w.ledger.record(pid, fi.RetainUntil)
			continue
		}
		ext := lockUntil(until)
		if err := rt.ExtendRetention(ctx, pack.ObjectName(pid), ext); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("extend retention of pack %s: %w", pid, err)
		}
		w.ledger.record(pid, ext)
	}
	return nil
}

func (l *lockLedger) known(p pack.ID, need time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	t, ok := l.until[p]
	return ok && !t.Before(need)
}

func (l *lockLedger) record(p pack.ID, t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.until == nil {
		l.until = map[pack.ID]time.Time{}
	}
	if t.After(l.until[p]) {
		l.until[p] = t
	}
}
