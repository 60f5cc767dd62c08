package vsstandby

import (
	"context"
	"fmt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
)

// changedSource reads a backup point's disk and lists as allocated only
// the spans that differ from the disk map the standby already equals:
// the hot-add write sends those and nothing else. A span that turned to
// zeros is listed too (it reads as zeros and is written as such).
type changedSource struct {
	*restore.DiskReader
	ext []hypervisor.Extent
}

func (s changedSource) Allocated() []hypervisor.Extent { return s.ext }

// openChanged opens disk d of a point for writing onto a standby that
// equals the disk map oldMap ("" or a map the repository no longer has:
// every span counts as changed).
func openChanged(ctx context.Context, r *repo.Repository, d repo.Disk, oldMap string) (changedSource, error) {
	dr, err := restore.OpenDisk(ctx, r, d, 64)
	if err != nil {
		return changedSource{}, err
	}
	m, err := r.OpenDiskMap(ctx, d.Map)
	if err != nil {
		return changedSource{}, err
	}
	cur, err := m.All(ctx)
	if err != nil {
		return changedSource{}, err
	}
	var old []id.ID
	if oldMap != "" {
		if om, err := r.OpenDiskMap(ctx, oldMap); err == nil {
			old, _ = om.All(ctx)
		}
	}
	cs := int64(m.ChunkSize())
	var ext []hypervisor.Extent
	for i, x := range cur {
		if x == repo.LostChunk {
			return changedSource{}, fmt.Errorf("span %d of the point was lost (a repair recorded it): a replica of it would not equal the source", i)
		}
		if old != nil && i < len(old) && old[i] == x {
			continue
		}
		off, n := int64(i)*cs, int64(m.SpanLength(uint64(i)))
		if k := len(ext) - 1; k >= 0 && ext[k].Offset+ext[k].Length == off {
			ext[k].Length += n
			continue
		}
		ext = append(ext, hypervisor.Extent{Offset: off, Length: n})
	}
	return changedSource{DiskReader: dr, ext: ext}, nil
}
