package repo

import (
	"context"
	"fmt"
	"strings"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
)

// RepairReport says what RebuildIndex did.
type RepairReport struct {
	Packs        int      `json:"packs"`
	Chunks       int      `json:"chunks"`
	Unreadable   []string `json:"unreadable_packs,omitempty"`
	Superseded   int      `json:"segments_superseded"`
	SegmentBytes int64    `json:"segment_bytes"`
}

// RebuildIndex reads the trailer of every pack and writes one segment that
// supersedes every existing segment, damaged ones included. It runs under
// the maintenance lease. Chunks in packs whose trailer is unreadable cannot
// be located afterwards; verify reports which backups they affect.
func (r *Repository) RebuildIndex(ctx context.Context) (*RepairReport, error) {
	lease, err := r.AcquireLease(ctx, "repair", "", "rebuild index", true)
	if err != nil {
		return nil, err
	}
	defer lease.Release(context.WithoutCancel(ctx))
	rep := &RepairReport{}
	var old []id.ID
	if err := r.st.List(ctx, index.Prefix, func(fi store.ObjectInfo) error {
		if sid, err := id.Parse(strings.TrimPrefix(fi.Name, index.Prefix)); err == nil {
			old = append(old, sid)
		}
		return nil
	}); err != nil {
		return nil, err
	}
	var entries []index.Entry
	err = r.st.List(ctx, "data/", func(fi store.ObjectInfo) error {
		pid, err := pack.ParseObjectName(fi.Name)
		if err != nil {
			return nil
		}
		pe, err := r.PackEntries(ctx, pid, fi.Size)
		if err != nil {
			rep.Unreadable = append(rep.Unreadable, fmt.Sprintf("%s: %v", fi.Name, err))
			return nil
		}
		rep.Packs++
		for _, e := range pe {
			entries = append(entries, index.Entry{ID: e.ID, Location: index.Location{Pack: pid, Offset: e.Offset, Length: e.Length, RawLength: e.RawLength}})
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	rep.Chunks = len(entries)
	seg, err := index.WriteSegment(ctx, r.st, r.key, entries, old)
	if err != nil {
		return nil, err
	}
	rep.Superseded, rep.SegmentBytes = len(old), seg.Size
	for _, sid := range old {
		if err := r.st.Delete(ctx, index.ObjectName(sid)); err != nil {
			r.log.Warn("superseded segment left for gc", "segment", sid.Short(), "err", err)
		}
	}
	return rep, r.ReloadIndex(ctx)
}
