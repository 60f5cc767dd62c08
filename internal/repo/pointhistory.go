package repo

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/store"
)

// pointHistory is the manifests HistoryPoints has read, by ID, with the
// version of the object each was read from.
type pointHistory struct {
	mu     sync.Mutex
	points map[id.ID]readPoint
}

type readPoint struct {
	p       *Point
	version string
}

// forget drops a manifest this process rewrites or deletes.
func (h *pointHistory) forget(x id.ID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.points, x)
}

// listedPoint is a manifest as the store lists it: its ID and the version
// of its object ("" when the store tells none: read it every time).
type listedPoint struct {
	id      id.ID
	version string
}

// listPoints lists the manifests with their objects' versions.
func (r *Repository) listPoints(ctx context.Context) ([]listedPoint, error) {
	var out []listedPoint
	err := r.st.List(ctx, snapshotsPrefix, func(fi store.ObjectInfo) error {
		x, err := id.Parse(strings.TrimPrefix(fi.Name, snapshotsPrefix))
		if err != nil {
			r.log.Warn("ignoring unexpected object", "name", fi.Name)
			return nil
		}
		out = append(out, listedPoint{id: x, version: objectVersion(fi)})
		return nil
	})
	return out, err
}

// objectVersion tells an object's content apart from any other it had:
// the store's version (an S3 ETag, the local file's inode, size and
// modification time), else its size and modification time.
func objectVersion(fi store.ObjectInfo) string {
	if fi.Version != "" {
		return fi.Version
	}
	if fi.ModTime.IsZero() {
		return ""
	}
	return fmt.Sprintf("%d-%d", fi.Size, fi.ModTime.UnixNano())
}

// HistoryPoints is Points (every readable manifest, oldest first) for a
// process that lists the points again and again on one open repository:
// the engine, at every job's start, to choose each VM's mode and parent.
// Each call lists the manifests but reads only those whose object it has
// not read before (a point committed since, or a manifest rewritten, by
// any process: UpdatePoint), and forgets those gone. A job's start so
// reads the points committed since the last one, not the whole
// repository. The points are shared between calls: read them, never
// change them.
func (r *Repository) HistoryPoints(ctx context.Context) ([]*Point, error) {
	listed, err := r.listPoints(ctx)
	if err != nil {
		return nil, err
	}
	h := &r.history
	// Held while reading: two jobs starting at once read a manifest once.
	h.mu.Lock()
	defer h.mu.Unlock()
	var unread []id.ID
	toRead := map[id.ID]bool{}
	for _, l := range listed {
		if rp, ok := h.points[l.id]; !ok || l.version == "" || rp.version != l.version {
			unread = append(unread, l.id)
			toRead[l.id] = true
		}
	}
	loaded, err := r.loadPoints(ctx, unread, nil)
	if err != nil {
		return nil, err
	}
	byID := make(map[id.ID]*Point, len(loaded))
	for _, p := range loaded {
		byID[p.ID] = p
	}
	kept := make(map[id.ID]readPoint, len(listed))
	out := make([]*Point, 0, len(listed))
	for _, l := range listed {
		rp := h.points[l.id]
		if toRead[l.id] {
			p := byID[l.id]
			if p == nil {
				continue // gone meanwhile, or unreadable (Points leaves it out too)
			}
			rp = readPoint{p: p, version: l.version}
		}
		kept[l.id] = rp
		out = append(out, rp.p)
	}
	h.points = kept
	sortPoints(out)
	return out, nil
}
