package verify

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/extsort"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/diskmap"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
)

// checker carries one verification. Its maps are keyed by damage (broken
// packs, locations and chunks), never by the repository's contents.
type checker struct {
	ctx   context.Context
	r     *repo.Repository
	o     Options
	rep   *Report
	snaps []*repo.Point

	badPacks map[pack.ID]packTrouble
	brokenAt map[location]brokenCopy // chunk copies that failed to authenticate
	lost     map[id.ID]string        // referenced chunks without a good copy: cause
	// causes groups lost chunks by what lost them, for reporting.
	causes   map[string]*cause
	pointsOf map[id.ID][]string // lost chunk -> points using it
	// dec and buf read the blobs only a pack's trailer lists (recoverable).
	dec *repo.Decoder
	buf []byte
}

type brokenCopy struct {
	chunk id.ID
	why   string
}

type location struct {
	pack   pack.ID
	offset uint32
}

// openIssues reports damage the repository found and worked around while
// opening: a damaged config or key file copy.
func (c *checker) openIssues() {
	for _, h := range c.r.Health() {
		c.problem(Problem{Kind: h.Kind, Object: h.Object, Detail: h.Detail + "; no backup lost data", Repair: h.Repair()})
	}
	for _, seg := range c.r.Index().Segments() {
		if h := seg.HeaderDamaged(); h != nil {
			c.problem(Problem{Kind: "index-segment", Object: "index/" + seg.ID.String(), Repair: repairIndex,
				Detail: fmt.Sprintf("index segment header is damaged (%v); the segment itself authenticates, no backup lost data", h)})
		}
	}
	for _, seg := range c.r.DamagedIndexSegments() {
		c.problem(Problem{Kind: "index-segment", Object: seg,
			Detail: "index segment is damaged and was skipped; the chunks it lists are still in their packs, whose trailers list them", Repair: repairIndex})
	}
}

// manifests loads every backup point; an unreadable manifest loses the
// point's listing but not its data (its disk maps and chunks are intact).
func (c *checker) manifests() error {
	snaps, err := c.r.Points(c.ctx, func(x id.ID, err error) {
		c.problem(Problem{Kind: "manifest", Object: "snapshots/" + x.String(),
			Detail: fmt.Sprintf("manifest of backup point %s is unreadable (%v); its disk maps and chunks are intact", x.Short(), err),
			Repair: repairSnapshots})
	})
	if err != nil {
		return err
	}
	c.snaps = snaps
	c.rep.Snapshots = len(snaps)
	for _, s := range snaps {
		if h := s.HeaderDamaged(); h != nil {
			c.problem(Problem{Kind: "manifest", Object: "snapshots/" + s.ID.String(), Repair: repairSnapshots,
				Detail: fmt.Sprintf("manifest header is damaged (%v); the manifest itself authenticates, no backup lost data", h)})
		}
	}
	return nil
}

// references sorts the IDs of every chunk a backup point references, and
// reports unreadable disk maps and disk map blocks (data loss: the chunk
// IDs of those spans are gone).
func (c *checker) references() (*extsort.Cursor, error) {
	refs := extsort.New(32, c.o.MemoryBudget/2, c.o.TempDir)
	used := map[string]bool{}
	for _, s := range c.snaps {
		for _, d := range s.Disks {
			c.rep.Disks++
			used[d.Map] = true
			var recorded int64
			err := c.scanMap(s, d, func(_ uint64, x id.ID) error {
				switch x {
				case id.ID{}:
					return nil
				case repo.LostChunk:
					recorded++
					return nil
				}
				c.rep.Chunks++
				return refs.Add(x[:])
			})
			if err != nil {
				refs.Close()
				return nil, err
			}
			if recorded > 0 {
				c.rep.Notices = append(c.rep.Notices, fmt.Sprintf("point %s (%s) disk %s: %d span(s) were recorded lost by a repair; it restores with those ranges missing (back the VM up again for a complete point)",
					s.ID.Short(), s.Source.VMName, d.Name, recorded))
			}
		}
	}
	if err := c.orphanMaps(used); err != nil {
		refs.Close()
		return nil, err
	}
	return refs.Cursor(true)
}

// scanMap iterates one disk's map, reporting damage as data loss of that
// point's disk (the whole disk, or the spans of a damaged block).
func (c *checker) scanMap(s *repo.Point, d repo.Disk, fn func(i uint64, x id.ID) error) error {
	m, err := diskmap.Open(c.ctx, c.r.Store(), c.r.Key(), d.Map)
	if err != nil {
		if !damage(err) {
			return err
		}
		c.problem(Problem{Kind: "disk-map", Object: d.Map, DataLoss: true, Repair: repairSnapshots,
			Detail:  fmt.Sprintf("disk map is unreadable (%v): the disk's chunk list is lost", err),
			Affects: []Affected{{Snapshot: s.ID.Short(), Source: s.Source.VMName, Disk: d.Name, Offset: -1, Spans: int64(spans(d))}}})
		return nil
	}
	if h := m.HeaderDamaged(); h != nil {
		c.problem(Problem{Kind: "disk-map", Object: d.Map, Repair: repairSnapshots,
			Detail: fmt.Sprintf("disk map header is damaged (%v); the map itself authenticates, no backup lost data", h)})
	}
	return m.Scan(c.ctx, fn, func(first, end uint64, err error) {
		c.problem(Problem{Kind: "disk-map", Object: d.Map, DataLoss: true, Repair: repairSnapshots,
			Detail: fmt.Sprintf("disk map block for spans %d-%d is unreadable (%v)", first, end-1, err),
			Affects: []Affected{{Snapshot: s.ID.Short(), Source: s.Source.VMName, Disk: d.Name,
				Offset: int64(first) * int64(m.ChunkSize()), Spans: int64(end - first)}}})
	})
}

func spans(d repo.Disk) uint64 {
	if d.ChunkSize <= 0 {
		return 0
	}
	return diskmap.ChunkCount(d.Size, d.ChunkSize)
}

// orphanMaps notes disk maps that no point references and no live session
// is writing: left by an interrupted forget, or by a point whose manifest
// was deleted. They are not a problem (gc removes them), but they are the
// data of a lost manifest, so verify says how to turn them back into points.
func (c *checker) orphanMaps(used map[string]bool) error {
	live := map[string]bool{}
	leases, err := c.r.Leases(c.ctx)
	if err != nil {
		return err
	}
	host := hostname()
	for _, l := range leases {
		if l.Session != "" && !l.Dead(time.Now(), host) {
			live[l.Session] = true
		}
	}
	var orphans []string
	err = c.r.Store().List(c.ctx, "maps/", func(fi store.ObjectInfo) error {
		session, _, _ := strings.Cut(strings.TrimPrefix(fi.Name, "maps/"), "-")
		if !used[fi.Name] && !live[session] {
			orphans = append(orphans, fi.Name)
		}
		return nil
	})
	if err != nil || len(orphans) == 0 {
		return err
	}
	c.rep.Notices = append(c.rep.Notices, fmt.Sprintf("%d disk map(s) belong to no backup point (%s): left by an interrupted forget, or by a point whose manifest was deleted. `coffer repair snapshots` turns them into points again; `coffer gc` deletes them.",
		len(orphans), clip(orphans, 3)))
	return nil
}

func clip(list []string, n int) string {
	if len(list) <= n {
		return strings.Join(list, ", ")
	}
	return strings.Join(list[:n], ", ") + fmt.Sprintf(" and %d more", len(list)-n)
}
