package gc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/diskmap"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
)

const (
	planName = "gc/plan"
	planSeal = "gc-plan"
	// clockSkew is the largest difference between the clocks of hosts that
	// share a repository that garbage collection tolerates.
	clockSkew = time.Minute
)

// planFile is the durable record of deletions waiting for sessions to end.
type planFile struct {
	Created   time.Time `json:"created"`
	MarkTime  time.Time `json:"mark_time"`
	Sessions  []string  `json:"sessions"`  // leases live when the plan was made
	Snapshots []string  `json:"snapshots"` // backup points the mark saw
	Packs     []string  `json:"packs"`
	Segments  []string  `json:"segments"`
	Maps      []string  `json:"maps"`
	Compacted string    `json:"compacted,omitempty"`
}

var (
	planEnc, _ = zstd.NewWriter(nil)
	planDec, _ = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(1<<30))
)

func savePlan(ctx context.Context, r *repo.Repository, pf *planFile) error {
	raw, err := json.Marshal(pf)
	if err != nil {
		return err
	}
	_, err = store.Put(ctx, r.Store(), planName, r.Key().Seal(nil, planEnc.EncodeAll(raw, nil), planSeal), store.PutOptions{})
	return err
}

func loadPlan(ctx context.Context, r *repo.Repository) (*planFile, error) {
	b, err := store.Get(ctx, r.Store(), planName, 0, -1)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errNoPlan
	}
	if err != nil {
		return nil, err
	}
	comp, err := r.Key().Open(nil, b, planSeal)
	if err != nil {
		return nil, fmt.Errorf("gc plan: %w", err)
	}
	raw, err := planDec.DecodeAll(comp, nil)
	if err != nil {
		return nil, fmt.Errorf("gc plan: %w", err)
	}
	pf := &planFile{}
	return pf, json.Unmarshal(raw, pf)
}

func hostname() string {
	h, _ := os.Hostname()
	return h
}

// execute carries out a pending plan once its sessions have ended.
func execute(ctx context.Context, r *repo.Repository, rep *Report, ownLease string) error {
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
	keep, usedMaps, err := rescue(ctx, r, pf, rep)
	if err != nil {
		return err
	}
	var retained planFile
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
	for _, name := range pf.Packs {
		pid, err := pack.ParseObjectName(name)
		if err == nil && keep[pid] {
			continue
		}
		if del(name) {
			rep.PacksDeleted++
		} else {
			retained.Packs = append(retained.Packs, name)
		}
	}
	for _, m := range pf.Maps {
		if usedMaps[m] {
			continue
		}
		if !del(m) {
			retained.Maps = append(retained.Maps, m)
		}
	}
	if len(retained.Packs)+len(retained.Segments)+len(retained.Maps) > 0 {
		retained.Created, retained.MarkTime, retained.Snapshots = pf.Created, pf.MarkTime, pf.Snapshots
		return savePlan(ctx, r, &retained)
	}
	if err := r.Store().Delete(ctx, planName); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

// rescue re-indexes chunks that backup points committed after the mark use
// but the compacted index dropped; their packs are kept.
func rescue(ctx context.Context, r *repo.Repository, pf *planFile, rep *Report) (map[pack.ID]bool, map[string]bool, error) {
	marked := map[string]bool{}
	for _, s := range pf.Snapshots {
		marked[s] = true
	}
	var bad []string
	snaps, err := r.Snapshots(ctx, func(x id.ID, err error) { bad = append(bad, x.Short()) })
	if err != nil {
		return nil, nil, err
	}
	if len(bad) > 0 {
		return nil, nil, fmt.Errorf("%w: unreadable snapshot manifests %s", errAbort, strings.Join(bad, ", "))
	}
	usedMaps := map[string]bool{}
	doomed := map[pack.ID]bool{}
	for _, name := range pf.Packs {
		if pid, err := pack.ParseObjectName(name); err == nil {
			doomed[pid] = true
		}
	}
	var old *index.Set
	keep := map[pack.ID]bool{}
	var entries []index.Entry
	for _, s := range snaps {
		for _, d := range s.Disks {
			usedMaps[d.Map] = true
		}
		if marked[s.ID.String()] {
			continue
		}
		for _, d := range s.Disks {
			m, err := diskmap.Open(ctx, r.Store(), r.Key(), d.Map)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: disk map of snapshot %s: %v", errAbort, s.ID.Short(), err)
			}
			err = m.Iterate(ctx, func(_ uint64, x id.ID) error {
				if x.IsZero() {
					return nil
				}
				loc, ok, err := r.Index().Lookup(ctx, x)
				switch {
				case err != nil:
					return err
				case ok && !doomed[loc.Pack]:
					return nil
				case ok:
					// Rescued by an earlier, interrupted execution of this
					// plan: the old segments may be gone, the pack must stay.
					keep[loc.Pack] = true
					return nil
				}
				if old == nil {
					if old, err = openSegments(ctx, r, pf.Segments); err != nil {
						return err
					}
				}
				loc, ok, err = old.Lookup(ctx, x)
				if err != nil {
					return err
				}
				if !ok {
					r.Logger().Error("a backup point references a chunk that is in no index", "snapshot", s.ID.Short(), "chunk", x.Short())
					return nil
				}
				keep[loc.Pack] = true
				entries = append(entries, index.Entry{ID: x, Location: loc})
				return nil
			})
			if err != nil {
				return nil, nil, err
			}
		}
	}
	if len(entries) > 0 {
		seg, err := index.WriteSegment(ctx, r.Store(), r.Key(), entries, nil)
		if err != nil {
			return nil, nil, err
		}
		r.Index().Add(seg)
		rep.ChunksRescued = len(entries)
	}
	return keep, usedMaps, nil
}

func openSegments(ctx context.Context, r *repo.Repository, ids []string) (*index.Set, error) {
	var segs []*index.Segment
	for _, s := range ids {
		sid, err := id.Parse(s)
		if err != nil {
			continue
		}
		fi, err := r.Store().Stat(ctx, index.ObjectName(sid))
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		seg, err := index.OpenSegment(ctx, r.Store(), r.Key(), sid, fi.Size)
		if err != nil {
			return nil, err
		}
		segs = append(segs, seg)
	}
	return index.NewSet(r.Store(), r.Key(), segs, 64), nil
}
