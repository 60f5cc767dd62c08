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
//
// A locked point is only readable with the repository's config and a key
// file, so those are locked too, at least as long as the longest-locked
// point: every version of them (on a versioned bucket a rewrite or a delete
// only stacks a new, unlocked version on top; what is below must survive).

// lockSlack is added to every lock so a pack shared by a daily chain is
// extended about once a week instead of on every backup.
const lockSlack = 7 * 24 * time.Hour

func lockUntil(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(lockSlack).UTC().Truncate(time.Second)
}

// lockLedger remembers the retention of packs seen in this process, and
// how long the config and key files are locked.
type lockLedger struct {
	mu    sync.Mutex
	until map[pack.ID]time.Time

	metaMu sync.Mutex
	meta   time.Time // config and key files are locked until then
}

// Retain makes sure every pack holding one of ids is locked until at least
// until. It is a no-op when until is zero or the backend has no retention.
func (w *Writer) Retain(ctx context.Context, ids []id.ID, until time.Time) error {
	return w.retain(ctx, until, func(fn func(id.ID) error) error {
		for _, x := range ids {
			if err := fn(x); err != nil {
				return err
			}
		}
		return nil
	})
}

// RetainMap is Retain for the IDs of a stored disk map, read back a block
// at a time: a backup streams its map to the store instead of holding
// its IDs (DiskMapWriter).
func (w *Writer) RetainMap(ctx context.Context, name string, until time.Time) error {
	return w.retain(ctx, until, func(fn func(id.ID) error) error {
		m, err := w.r.OpenDiskMap(ctx, name)
		if err != nil {
			return err
		}
		return m.Iterate(ctx, func(_ uint64, x id.ID) error { return fn(x) })
	})
}

// retain is Retain over the IDs each calls fn with; each is only called
// when the backend has retention.
func (w *Writer) retain(ctx context.Context, until time.Time, each func(fn func(id.ID) error) error) error {
	rt, ok := w.r.st.(store.Retainer)
	if until.IsZero() || !ok || !w.r.st.Properties().Retention {
		return nil
	}
	need := until.UTC()
	packs := map[pack.ID]bool{}
	if err := w.packsOf(ctx, need, each, packs); err != nil {
		return err
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
		ext, err := w.r.extendLock(ctx, rt, pack.ObjectName(pid), need, lockUntil(until))
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("extend retention of pack %s: %w", pid, err)
		}
		w.ledger.record(pid, ext)
	}
	return w.retainMetadata(ctx, need)
}

// packsOf adds to packs the pack of every ID each gives, waiting for
// the packs of this session written with a shorter lock than need.
func (w *Writer) packsOf(ctx context.Context, need time.Time, each func(fn func(id.ID) error) error, packs map[pack.ID]bool) error {
	seen := map[id.ID]bool{}
	return each(func(x id.ID) error {
		if x.IsZero() || seen[x] {
			return nil
		}
		seen[x] = true
		w.mu.Lock()
		p := w.pending[x]
		w.mu.Unlock()
		if p != nil && p.pack != nil {
			if !p.pack.stream.retain.Before(need) {
				return nil // written by this session: locked at creation
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
			return nil
		}
		loc, found, err := w.r.Index().Lookup(ctx, x)
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("%w: %s", ErrChunkMissing, x.Short())
		}
		packs[loc.Pack] = true
		return nil
	})
}

// retainMetadata locks the config and key files for a point locked until
// need, once per session and extension: the backups of a session (the VMs
// of a job) take turns, so none lists a lock another is extending.
func (w *Writer) retainMetadata(ctx context.Context, need time.Time) error {
	l := &w.ledger
	l.metaMu.Lock()
	defer l.metaMu.Unlock()
	if !l.meta.Before(need) {
		return nil
	}
	if err := w.r.retainMetadata(ctx, need); err != nil {
		return err
	}
	l.meta = lockUntil(need)
	return nil
}

// retainMetadata makes sure every version of the config and of every key
// file is locked until at least need, extending short locks to need plus
// the slack. Versions listed here are all there is: a key added later is
// locked when added (AddKey), a config is never rewritten.
func (r *Repository) retainMetadata(ctx context.Context, need time.Time) error {
	if !r.st.Properties().Retention {
		return nil
	}
	ext := lockUntil(need)
	vs, ok := r.st.(store.Versioned)
	if _, versioned := store.Innermost(r.st).(store.Versioned); !ok || !versioned {
		// A store without versions (a repository server's immutable
		// directory): a rewrite cannot hide an older version, so locking
		// the current ones is all there is to lock.
		return r.retainCurrentMetadata(ctx, need, ext)
	}
	// Another session may extend a version between this listing and this
	// extension, and the server refuses to shorten a lock: a refused pass
	// is followed by another, which sees that lock.
	var err error
	for range 3 {
		if err = r.extendMetadata(ctx, vs, need, ext); err == nil || errors.Is(err, errListDenied) {
			break
		}
	}
	if errors.Is(err, errListDenied) {
		// A credential without s3:ListBucketVersions: lock what coffer
		// wrote (the current versions; it never rewrites these).
		r.log.Warn("cannot list object versions; locking only the current config and key files (grant s3:ListBucketVersions to lock every version)", "err", err)
		return r.retainCurrentMetadata(ctx, need, ext)
	}
	return err
}

// errListDenied marks a listing of versions refused for lack of permission.
var errListDenied = errors.New("listing object versions is not permitted")

// extendMetadata is one pass of retainMetadata.
func (r *Repository) extendMetadata(ctx context.Context, vs store.Versioned, need, ext time.Time) error {
	for _, prefix := range []string{configName, keysPrefix} {
		listed := false
		err := vs.Versions(ctx, prefix, func(name string, versions []store.Version) error {
			listed = true
			if prefix == configName && name != configName {
				return nil // another object whose name starts with "config"
			}
			for _, v := range versions {
				if v.Marker || !v.RetainUntil.Before(need) {
					continue
				}
				if err := vs.ExtendVersionRetention(ctx, v, ext); err != nil {
					return fmt.Errorf("lock %s: %w", name, err)
				}
			}
			return nil
		})
		if !listed && errors.Is(err, store.ErrPermission) {
			err = fmt.Errorf("%w: %w", errListDenied, err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// retainCurrentMetadata locks the current version of the config and of
// every key file until ext, where one is locked for less than need.
func (r *Repository) retainCurrentMetadata(ctx context.Context, need, ext time.Time) error {
	rt, ok := r.st.(store.Retainer)
	if !ok {
		return nil
	}
	names := []string{configName}
	err := r.st.List(ctx, keysPrefix, func(fi store.ObjectInfo) error {
		names = append(names, fi.Name)
		return nil
	})
	if err != nil {
		return err
	}
	for _, name := range names {
		fi, err := r.st.Stat(ctx, name)
		if err != nil {
			return fmt.Errorf("lock %s: %w", name, err)
		}
		if !fi.RetainUntil.Before(need) {
			continue
		}
		if _, err := r.extendLock(ctx, rt, name, need, ext); err != nil {
			return fmt.Errorf("lock %s: %w", name, err)
		}
	}
	return nil
}

// extendLock extends the lock of name to ext and returns the lock it now
// has. Another session may extend it further between a caller's check and
// this call, and the server refuses to shorten a lock: a refusal is no
// error when the lock now reaches need.
func (r *Repository) extendLock(ctx context.Context, rt store.Retainer, name string, need, ext time.Time) (time.Time, error) {
	err := rt.ExtendRetention(ctx, name, ext)
	if err == nil {
		return ext, nil
	}
	if fi, serr := r.st.Stat(ctx, name); serr == nil && !fi.RetainUntil.Before(need) {
		return fi.RetainUntil, nil
	}
	return time.Time{}, err
}

// metadataLock is how long the config is locked: the retention of the
// longest-locked point so far (plus slack), zero when nothing is locked.
func (r *Repository) metadataLock(ctx context.Context) (time.Time, error) {
	if !r.st.Properties().Retention {
		return time.Time{}, nil
	}
	fi, err := r.st.Stat(ctx, configName)
	if err != nil {
		return time.Time{}, fmt.Errorf("retention of the config: %w", err)
	}
	if !fi.RetainUntil.After(time.Now()) {
		return time.Time{}, nil
	}
	return fi.RetainUntil, nil
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
