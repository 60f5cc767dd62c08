package gc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
)

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// execute carries out a pending plan once its sessions have ended.
func execute(ctx context.Context, r *repo.Repository, o Options, rep *Report, ownLease string) error {
	pf, err := loadPlan(ctx, r)
	if errors.Is(err, errNoPlan) {
		return nil
	}
	if err != nil {
		return err
	}
	leases, err := r.Leases(ctx)
	if err != nil {
		return err
	}
	listed := map[string]bool{}
	for _, name := range pf.Sessions {
		listed[name] = true
	}
	// Wait for every session that may have loaded the index before the
	// compaction: those listed when the plan was made, and any live lease
	// created before then (allowing for clock skew between hosts), which a
	// listing that lagged behind could have missed.
	for _, l := range leases {
		if l.Name == ownLease || l.Dead(time.Now(), hostname()) {
			continue
		}
		if listed[l.Name] || l.Created.Before(pf.Created.Add(clockSkew)) {
			rep.WaitingFor = append(rep.WaitingFor, fmt.Sprintf("%s on %s (pid %d) since %s", l.Kind, l.Host, l.PID, l.Created.Local().Format(time.DateTime)))
		}
	}
	if len(rep.WaitingFor) > 0 {
		rep.Deferred = true
		return nil
	}
	keep, used, err := rescue(ctx, r, o, pf, rep)
	if err != nil {
		return err
	}
	defer keep.Close()
	defer used.Close()
	retained := planFile{ID: newPlanID(), Created: pf.Created, MarkTime: pf.MarkTime, Snapshots: pf.Snapshots}
	del := func(name string) bool {
		err := r.Store().Delete(ctx, name)
		switch {
		case err == nil, errors.Is(err, store.ErrNotFound):
			return true
		case errors.Is(err, store.ErrRetained):
			rep.Retained++
			return false
		}
		r.Logger().Warn("gc could not delete an object; it stays for the next run", "object", name, "err", err)
		return false
	}
	// Superseded index segments go before the packs they list: a kill in
	// between then leaves unindexed garbage packs (deleted by the next
	// run, which resumes this plan), never an index naming a missing pack.
	for _, sid := range pf.Segments {
		if sid == pf.Compacted {
			continue
		}
		if !del(index.Prefix + sid) {
			retained.Segments = append(retained.Segments, sid)
		}
	}
	var nPacks, nMaps int
	packs := newListWriter(ctx, r, retained.ID, "packs")
	err = readList(ctx, r, pf.Packs, pf.PackParts, func(name string) error {
		if pid, err := pack.ParseObjectName(name); err == nil {
			if kept, err := keep.SeekTo(pid[:]); err != nil || kept {
				return err
			}
		}
		if del(name) {
			rep.PacksDeleted++
			return nil
		}
		nPacks++
		return packs.add(name)
	})
	if err == nil {
		retained.PackParts, err = packs.finish()
	}
	if err != nil {
		return err
	}
	maps := newListWriter(ctx, r, retained.ID, "maps")
	var rec [mapRecSize]byte
	err = readList(ctx, r, pf.Maps, pf.MapParts, func(name string) error {
		if !mapRecord(name, &rec) {
			return nil // not a name a plan of this version writes: left alone
		}
		if inUse, err := used.SeekTo(rec[:]); err != nil || inUse {
			return err
		}
		if del(name) {
			return nil
		}
		nMaps++
		return maps.add(name)
	})
	if err == nil {
		retained.MapParts, err = maps.finish()
	}
	if err != nil {
		return err
	}
	if err := tidyDamage(ctx, r); err != nil {
		return err
	}
	if nPacks+nMaps+len(retained.Segments) > 0 {
		if err := savePlan(ctx, r, &retained); err != nil {
			return err
		}
		removeStaleParts(ctx, r, &retained)
		return nil
	}
	if err := r.Store().Delete(ctx, planName); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	removeStaleParts(ctx, r, nil)
	return nil
}

// tidyDamage rewrites the damage record after deletions: a broken copy
// whose pack is gone is dropped when the chunk has a good copy (the index
// finds it), else kept without a place, so verify and backups still know
// the chunk is lost. It runs after every execution, so one interrupted
// before it is caught up by the next. The record is small (it grows with
// damage, not with the repository): a Stat per damaged pack.
func tidyDamage(ctx context.Context, r *repo.Repository) error {
	gone := map[pack.ID]bool{}
	anyGone := false
	for _, b := range r.Damage() {
		if b.Pack == (pack.ID{}) {
			continue
		}
		if _, seen := gone[b.Pack]; seen {
			continue
		}
		_, err := r.Store().Stat(ctx, pack.ObjectName(b.Pack))
		switch {
		case errors.Is(err, store.ErrNotFound):
			gone[b.Pack], anyGone = true, true
		case err != nil:
			return err
		default:
			gone[b.Pack] = false
		}
	}
	if !anyGone {
		return nil
	}
	if err := r.ReloadIndex(ctx); err != nil {
		return err
	}
	var lookupErr error
	_, err := r.RewriteDamage(ctx, func(b repo.BadChunk) (repo.BadChunk, bool) {
		if !gone[b.Pack] {
			return b, true
		}
		_, ok, err := r.Index().Lookup(ctx, b.Chunk)
		if err != nil {
			lookupErr = err
			return b, true
		}
		b.Pack, b.Offset = pack.ID{}, 0
		return b, !ok
	})
	return errors.Join(err, lookupErr)
}
