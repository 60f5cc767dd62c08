package repo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
)

// RecoverDeadSessions indexes the packs written by sessions that died before
// indexing them (kill -9, power loss, lost lease), so their chunks are reused
// by the next backup instead of being stored again, and removes their
// leases. It returns the number of chunks recovered.
func (r *Repository) RecoverDeadSessions(ctx context.Context) (int, error) {
	leases, err := r.Leases(ctx)
	if err != nil {
		return 0, err
	}
	total := 0
	now := time.Now()
	for _, l := range leases {
		if l.Name == maintenanceName || !l.Dead(now, r.hostname) {
			continue
		}
		if l.Session != "" {
			n, err := r.recoverSession(ctx, l.Session)
			if err != nil {
				return total, fmt.Errorf("session %s: %w", l.Session, err)
			}
			if n > 0 {
				r.log.Info("recovered chunks of an interrupted session", "session", l.Session, "host", l.Host, "pid", l.PID, "chunks", n)
			}
			total += n
		}
		if err := r.st.Delete(ctx, l.Name); err != nil && !errors.Is(err, store.ErrNotFound) {
			r.log.Warn("could not remove a dead lease", "lease", l.Name, "err", err)
		}
	}
	return total, nil
}

// recoverSession indexes every pack of one session that the index does not
// already cover.
func (r *Repository) recoverSession(ctx context.Context, session string) (int, error) {
	var packs []store.ObjectInfo
	if err := r.st.List(ctx, "data/"+session, func(fi store.ObjectInfo) error {
		packs = append(packs, fi)
		return nil
	}); err != nil {
		return 0, err
	}
	var entries []index.Entry
	for _, fi := range packs {
		pid, err := pack.ParseObjectName(fi.Name)
		if err != nil {
			continue
		}
		pe, err := r.PackEntries(ctx, pid, fi.Size)
		if err != nil {
			r.log.Warn("skipping an unreadable pack of an interrupted session", "pack", pid, "err", err)
			continue
		}
		covered := true
		for _, e := range pe {
			loc, ok, err := r.Index().Lookup(ctx, e.ID)
			if err != nil {
				return 0, err
			}
			if !ok || loc.Pack != pid {
				covered = false
			}
			entries = append(entries, index.Entry{ID: e.ID, Location: index.Location{Pack: pid, Offset: e.Offset, Length: e.Length, RawLength: e.RawLength}})
		}
		if covered {
			entries = entries[:len(entries)-len(pe)]
		}
	}
	if len(entries) == 0 {
		return 0, nil
	}
	seg, err := index.WriteSegment(ctx, r.st, r.key, entries, nil)
	if err != nil {
		return 0, err
	}
	r.Index().Add(seg)
	return len(entries), nil
}

// PackEntries reads a pack's trailer.
func (r *Repository) PackEntries(ctx context.Context, pid pack.ID, size int64) ([]pack.Entry, error) {
	name := pack.ObjectName(pid)
	if size < 0 {
		fi, err := r.st.Stat(ctx, name)
		if err != nil {
			return nil, err
		}
		size = fi.Size
	}
	return pack.ReadTrailer(func(off, n int64) ([]byte, error) { return store.Get(ctx, r.st, name, off, n) }, size, r.key)
}
