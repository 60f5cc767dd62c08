package repair

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/diskmap"
	"github.com/coffer-backup/coffer/internal/store"
)

// mapFix is a disk map to write again: the IDs that could be read, with
// repo.LostChunk for the spans that could not.
type mapFix struct {
	disk int
	ids  []id.ID
	lost int64
	why  string
}

// Snapshots mends backup points:
//
//   - a point whose disk map is damaged gets a new map with every span
//     that can still be read; the spans of unreadable blocks (or of a
//     whole unreadable map) are marked lost (repo.LostChunk), so a restore
//     says which ranges are missing instead of failing or inventing data;
//   - a manifest or map whose header alone is damaged is written again;
//   - disk maps that no readable manifest references (the manifest is
//     unreadable or was deleted, or a forget was interrupted) become
//     recovered points, one per map, so their data stays restorable;
//     `coffer forget` removes them again if they are not wanted;
//   - unreadable manifests are moved aside to damaged/snapshots/.
func Snapshots(ctx context.Context, r *repo.Repository, o Options) (*Report, error) {
	rep := &Report{DryRun: o.DryRun}
	lease, err := maintenance(ctx, r, "repair backup points")
	if err != nil {
		return nil, err
	}
	defer lease.Release(context.WithoutCancel(ctx))
	var unreadable []id.ID
	snaps, err := r.Points(ctx, func(x id.ID, err error) { unreadable = append(unreadable, x) })
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	fixes := map[*repo.Point][]mapFix{}
	headers := []*repo.Point{}
	for _, s := range snaps {
		if s.HeaderDamaged() != nil {
			headers = append(headers, s)
			rep.step("rewrite the damaged header of manifest %s", s.ID.Short())
		}
		for i, d := range s.Disks {
			used[d.Map] = true
			fix, err := readMap(ctx, r, d)
			if err != nil {
				return nil, err
			}
			if fix == nil {
				continue
			}
			fix.disk = i
			fixes[s] = append(fixes[s], *fix)
			rep.Dropped += fix.lost
			rep.Kept += int64(len(fix.ids)) - fix.lost
			if fix.lost > 0 {
				rep.Affected = append(rep.Affected, Affected{Snapshot: s.ID.Short(), Source: s.Source.VMName, Disk: d.Name, Spans: fix.lost})
			}
			rep.step("point %s disk %s: %s; write a new disk map keeping %d span(s), marking %d lost", s.ID.Short(), d.Name, fix.why, int64(len(fix.ids))-fix.lost, fix.lost)
		}
	}
	orphans, err := orphanMaps(ctx, r, used)
	if err != nil {
		return nil, err
	}
	for _, fi := range orphans {
		rep.step("turn disk map %s, which no readable backup point references, into a recovered point", fi.Name)
	}
	for _, x := range unreadable {
		rep.step("move the unreadable manifest snapshots/%s aside to damaged/", x)
	}
	if o.DryRun || len(fixes)+len(headers)+len(orphans)+len(unreadable) == 0 {
		if len(rep.Steps) == 0 {
			rep.step("every backup point's manifest and disk maps are readable; nothing to do")
		}
		return rep, nil
	}
	w, err := r.NewWriter(ctx, "repair snapshots")
	if err != nil {
		return nil, err
	}
	err = apply(ctx, r, w, fixes, headers, orphans)
	if cerr := w.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, err
	}
	for _, x := range unreadable {
		if err := moveAside(ctx, r.Store(), "snapshots/"+x.String()); err != nil {
			return rep, fmt.Errorf("move manifest %s aside: %w", x.Short(), err)
		}
	}
	return rep, nil
}

// apply writes the new maps and manifests. New objects come first; the
// old maps are moved aside only once the manifest no longer needs them.
func apply(ctx context.Context, r *repo.Repository, w *repo.Writer, fixes map[*repo.Point][]mapFix, headers []*repo.Point, orphans []store.ObjectInfo) error {
	for s, list := range fixes {
		var old []string
		for _, f := range list {
			d := &s.Disks[f.disk]
			name, err := w.WriteDiskMap(ctx, d.Size, d.ChunkSize, f.ids, s.RetainUntil)
			if err != nil {
				return err
			}
			old = append(old, d.Map)
			d.Map = name
			d.LostSpans = f.lost
			if f.lost > 0 {
				s.Warnings = append(s.Warnings, fmt.Sprintf("disk %s: %d span(s) lost to a damaged disk map (repaired %s)", d.Name, f.lost, time.Now().UTC().Format(time.RFC3339)))
			}
		}
		if err := r.UpdatePoint(ctx, s); err != nil {
			return err
		}
		for _, name := range old {
			if err := moveAside(ctx, r.Store(), name); err != nil {
				r.Logger().Warn("replaced disk map left in place", "map", name, "err", err)
			}
		}
	}
	for _, s := range headers {
		if _, fixed := fixes[s]; fixed {
			continue // written again above
		}
		if err := r.UpdatePoint(ctx, s); err != nil {
			return err
		}
	}
	for _, fi := range orphans {
		if err := recoverPoint(ctx, r, w, fi); err != nil {
			return err
		}
	}
	return nil
}

// readMap reads one disk's map and returns what to write instead, or nil
// when it is intact.
func readMap(ctx context.Context, r *repo.Repository, d repo.Disk) (*mapFix, error) {
	m, err := diskmap.Open(ctx, r.Store(), r.Key(), d.Map)
	if err != nil {
		if !isDamage(err) {
			return nil, err
		}
		n := diskmap.ChunkCount(d.Size, d.ChunkSize)
		ids := make([]id.ID, n)
		for i := range ids {
			ids[i] = repo.LostChunk
		}
		return &mapFix{ids: ids, lost: int64(n), why: fmt.Sprintf("its disk map is unreadable (%v)", err)}, nil
	}
	ids := make([]id.ID, m.Count())
	var lost int64
	var why []string
	err = m.Scan(ctx, func(i uint64, x id.ID) error {
		ids[i] = x
		return nil
	}, func(first, end uint64, err error) {
		for i := first; i < end; i++ {
			ids[i] = repo.LostChunk
		}
		lost += int64(end - first)
		why = append(why, fmt.Sprintf("spans %d-%d unreadable", first, end-1))
	})
	if err != nil {
		return nil, err
	}
	if h := m.HeaderDamaged(); h != nil {
		why = append(why, "damaged header")
	}
	if len(why) == 0 {
		return nil, nil
	}
	return &mapFix{ids: ids, lost: lost, why: strings.Join(why, ", ")}, nil
}

// orphanMaps lists disk maps no readable point references and no live
// session is writing.
func orphanMaps(ctx context.Context, r *repo.Repository, used map[string]bool) ([]store.ObjectInfo, error) {
	leases, err := r.Leases(ctx)
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	live := map[string]bool{}
	for _, l := range leases {
		if l.Session != "" && !l.Dead(time.Now(), host) {
			live[l.Session] = true
		}
	}
	var out []store.ObjectInfo
	err = r.Store().List(ctx, "maps/", func(fi store.ObjectInfo) error {
		session, _, _ := strings.Cut(strings.TrimPrefix(fi.Name, "maps/"), "-")
		if !used[fi.Name] && !live[session] {
			out = append(out, fi)
		}
		return nil
	})
	return out, err
}

// recoverPoint makes a backup point of one disk map without a manifest.
// What the manifest held (VM name, disk names, configuration) is gone; the
// disk's contents are not.
func recoverPoint(ctx context.Context, r *repo.Repository, w *repo.Writer, fi store.ObjectInfo) error {
	d := repo.Disk{Key: "0", Name: "disk", Kind: "disk", Map: fi.Name, Mode: "recovered"}
	fix := &mapFix{}
	m, err := diskmap.Open(ctx, r.Store(), r.Key(), fi.Name)
	if err != nil {
		if !isDamage(err) {
			return err
		}
		r.Logger().Warn("a disk map without a manifest is unreadable too; nothing to recover from it", "map", fi.Name, "err", err)
		return nil
	}
	d.Size, d.ChunkSize = m.DiskSize(), m.ChunkSize()
	if fix, err = readMap(ctx, r, d); err != nil {
		return err
	}
	if fix != nil {
		if d.Map, err = w.WriteDiskMap(ctx, d.Size, d.ChunkSize, fix.ids, time.Time{}); err != nil {
			return err
		}
		d.LostSpans = fix.lost
	}
	name := "recovered-" + strings.TrimPrefix(fi.Name, "maps/")
	s := &repo.Point{Time: fi.ModTime.UTC(), Host: "unknown", Source: repo.Source{Kind: "recovered", VMName: name},
		Mode: "full", Disks: []repo.Disk{d},
		Warnings: []string{fmt.Sprintf("recovered by `coffer repair snapshots` from disk map %s, which no readable manifest referenced: the VM's name, disk names and configuration are unknown", fi.Name)}}
	if err := w.Commit(ctx, s, nil); err != nil {
		return err
	}
	if fix != nil {
		return moveAside(ctx, r.Store(), fi.Name)
	}
	return nil
}

func isDamage(err error) bool {
	return errors.Is(err, diskmap.ErrFormat) || errors.Is(err, store.ErrInvalidRange) || errors.Is(err, store.ErrNotFound)
}
