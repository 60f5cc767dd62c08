// Package repair mends a damaged repository without ever making it worse.
//
// Every repair keeps every chunk that can still be read and authenticated,
// and every disk map block and manifest that still decodes. Before it
// changes anything it works out a plan: what it rewrites, what it cannot
// keep (only objects that are already unreadable) and which backup points
// lost data because of that, so `--dry-run` shows exactly what a real run
// will do. New objects are written before the damaged ones are removed,
// and damaged objects are moved aside (damaged/...) rather than deleted
// where they still hold bytes, so a crash at any point leaves a repository
// at least as good as before.
//
//   - Index rebuilds the chunk index from the packs' trailers; for a pack
//     whose trailer is damaged it keeps the index entries whose chunks
//     authenticate.
//   - Packs rewrites packs with a damaged header, trailer or blobs, or cut
//     short: every chunk that authenticates moves to a new pack.
//   - Snapshots rewrites points whose disk maps are damaged (readable
//     blocks kept, lost spans marked as lost), and turns disk maps whose
//     manifest is gone or unreadable into recovered points.
//
// Repairs run under the maintenance lease, so garbage collection never
// runs beside them.
package repair

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/diskmap"
	"github.com/coffer-backup/coffer/internal/store"
)

// Report is a repair's plan and, unless it was a dry run, its outcome.
type Report struct {
	DryRun bool `json:"dry_run"`
	// Steps says what the repair does (or would do), in order.
	Steps []string `json:"steps"`
	// Kept counts chunks (or spans) that stay readable; Dropped counts
	// unreadable ones the repair cannot keep.
	Kept    int64 `json:"kept"`
	Dropped int64 `json:"dropped"`
	// Affected are the backup points that lost data through what was
	// dropped: it was unreadable before the repair, so they had lost it
	// already; the repair makes the loss explicit.
	Affected []Affected `json:"affected_points"`
}

// Affected is one disk of a backup point that lost data.
type Affected struct {
	Snapshot string `json:"snapshot"`
	Source   string `json:"source"`
	Disk     string `json:"disk"`
	Spans    int64  `json:"spans"`
}

func (rep *Report) step(format string, a ...any) {
	rep.Steps = append(rep.Steps, fmt.Sprintf(format, a...))
}

// maintenance takes the maintenance lease for a repair.
func maintenance(ctx context.Context, r *repo.Repository, what string) (*repo.Lease, error) {
	return r.AcquireLease(ctx, "repair", "", what, true)
}

// affectedBy finds the points and disks that use any of the chunks in
// lost (a set bounded by the damage found, not by the repository).
func affectedBy(ctx context.Context, r *repo.Repository, lost map[id.ID]bool) ([]Affected, error) {
	if len(lost) == 0 {
		return nil, nil
	}
	snaps, err := r.Points(ctx, nil)
	if err != nil {
		return nil, err
	}
	var out []Affected
	for _, s := range snaps {
		for _, d := range s.Disks {
			m, err := diskmap.Open(ctx, r.Store(), r.Key(), d.Map)
			if err != nil {
				continue // a damaged map is repair snapshots' business
			}
			var n int64
			err = m.Scan(ctx, func(_ uint64, x id.ID) error {
				if lost[x] {
					n++
				}
				return nil
			}, func(uint64, uint64, error) {})
			if err != nil {
				return nil, err
			}
			if n > 0 {
				out = append(out, Affected{Snapshot: s.ID.Short(), Source: s.Source.VMName, Disk: d.Name, Spans: n})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Snapshot < out[j].Snapshot })
	return out, nil
}

// moveAside keeps a damaged object's bytes under damaged/ and removes it
// from its name. What cannot be read is not copied; an object under
// retention stays where it is (it cannot be removed), which the caller
// reports.
func moveAside(ctx context.Context, st store.Store, name string) error {
	b, err := store.Get(ctx, st, name, 0, -1)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil
	case err == nil:
		if _, err := store.Put(ctx, st, "damaged/"+name, b, store.PutOptions{}); err != nil {
			return fmt.Errorf("keep a copy of %s: %w", name, err)
		}
	}
	if err := st.Delete(ctx, name); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}
