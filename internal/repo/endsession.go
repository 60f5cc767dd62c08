package repo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/store"
)

// A write session's packs are indexed by the session itself (Flush, Close)
// or, once it is dead, by the next session's RecoverDeadSessions; a lease
// on another host only dies when it expires (LeaseTTL, 10 minutes). Whoever
// knows sooner that a session's process can no longer be trusted to finish
// (the fleet's leader, for a worker it declared lost or fenced) ends the
// session here, so that a retry deduplicates against what it stored at
// once.
//
// Ending a session does not delete its lease: the holder may in fact still
// run (a process that was stopped, a partition that ends), and garbage
// collection is safe only because it waits for every holder that may
// commit (docs/design/repository-format.md, "Ending a session"). The lease
// is rewritten instead, marked Ended and with its expiry unchanged: the
// holder's next refresh fails (its version changed), so it stops writing,
// and gc and verify treat it as live until it expires, as they would have
// without the end.

// ErrSessionContended means a session's lease changed under each of
// EndSession's attempts to mark it ended.
var ErrSessionContended = errors.New("session lease contended")

// EndSessionsOf ends every write session whose lease names owner
// (LeaseInfo.Owner, NewWriterFor). It returns how many sessions it ended
// and how many chunks of theirs it indexed.
func (r *Repository) EndSessionsOf(ctx context.Context, owner string) (sessions, chunks int, err error) {
	if owner == "" {
		return 0, 0, errors.New("end sessions: no owner named")
	}
	leases, err := r.Leases(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, l := range leases {
		if l.Owner != owner || l.Session == "" || l.Name == maintenanceName {
			continue
		}
		n, err := r.endSession(ctx, l)
		if err != nil {
			return sessions, chunks, fmt.Errorf("session %s: %w", l.Session, err)
		}
		sessions++
		chunks += n
	}
	return sessions, chunks, nil
}

// EndSession declares the write session named by its prefix dead now: its
// lease is marked ended (see above) and its packs are indexed as
// RecoverDeadSessions indexes a dead session's. It returns the number of
// chunks indexed; a session without a lease (already ended or released)
// only has its packs indexed, which finds nothing new after a clean end.
func (r *Repository) EndSession(ctx context.Context, session string) (int, error) {
	leases, err := r.Leases(ctx)
	if err != nil {
		return 0, err
	}
	for _, l := range leases {
		if l.Session == session && l.Name != maintenanceName {
			return r.endSession(ctx, l)
		}
	}
	return r.recoverSession(ctx, session)
}

func (r *Repository) endSession(ctx context.Context, l LeaseInfo) (int, error) {
	// The mark first: from then on the holder cannot refresh, so it stops
	// before long, and fewer of its packs are left for the recovery after
	// its lease expires to index.
	if err := r.markEnded(ctx, l.Name); err != nil {
		return 0, err
	}
	n, err := r.recoverSession(ctx, l.Session)
	if err != nil {
		return 0, err
	}
	r.log.Info("ended a write session", "session", l.Session, "owner", l.Owner, "host", l.Host, "pid", l.PID, "chunks", n)
	return n, nil
}

// markEnded rewrites a lease as ended, keeping its expiry, conditionally
// on the version read so that a refresh in between is not undone (its
// later expiry is kept). Without conditional writes the holder's next
// refresh may write over the mark: the session then stays live, which
// only delays what its end would have allowed.
func (r *Repository) markEnded(ctx context.Context, name string) error {
	for range 3 {
		fi, err := r.st.Stat(ctx, name)
		if errors.Is(err, store.ErrNotFound) {
			return nil // released meanwhile: the session ended by itself
		} else if err != nil {
			return err
		}
		info, err := r.readLease(ctx, fi)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		} else if err != nil {
			return err
		}
		if info.Unreadable || !info.Ended.IsZero() {
			return nil
		}
		info.Ended = time.Now().UTC()
		opts := store.PutOptions{}
		if r.st.Properties().ConditionalWrites {
			opts.IfMatch = fi.Version
		}
		_, err = store.Put(ctx, r.st, name, r.encodeLease(info), opts)
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrPreconditionFailed) && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("mark lease ended: %w", err)
		}
	}
	return fmt.Errorf("mark lease %s ended: %w", name, ErrSessionContended)
}
