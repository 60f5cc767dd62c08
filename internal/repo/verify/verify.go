// Package verify checks a repository and says, for everything it finds,
// whether a backup point lost data and what mends it.
//
// The structural check reads every manifest and disk map and the whole
// index, and confirms that every chunk a backup point references has a
// copy in a pack that exists and is long enough. With ReadData it also
// reads packs and checks their header, their table of contents (trailer)
// and every chunk blob (decrypt, decompress, re-hash against the chunk ID).
//
// Findings are of two severities:
//
//   - metadata damage (a damaged index segment, pack header or trailer, a
//     disk map's header, a key file copy, the config) loses no data: every
//     chunk is still readable, and a repair command rewrites the damaged
//     object from what is intact;
//   - data loss: a chunk some point needs has no readable copy (corrupt,
//     in a missing or truncated pack, in no index and no pack), or a disk
//     map block is unreadable. Each such finding names exactly the backup
//     points and disks, and the offsets, that lost data.
//
// Broken chunk copies are written to the repository's damage record, so
// the next backup of an affected disk stores those chunks again instead of
// building on them (see repo/damage.go).
//
// # Memory
//
// Nothing proportional to the repository is held in memory: referenced
// chunk IDs, index entries (by pack, and by chunk ID) and the pack listing
// are sorted externally (internal/extsort, within MemoryBudget) and
// merge-joined. The index is read one segment and one block at a time, a
// pack's entries are held only while that pack is read, and each reading
// goroutine reuses its buffers. What is kept is proportional to the backup
// points, to the damage found and, with ReadData, to the packs being read
// (one pack per connection of the store).
package verify

import (
	"context"
	"fmt"
	"hash/fnv"
	"os"
	"sort"
	"sync/atomic"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/pack"
)

// Options select how deep to check.
type Options struct {
	ReadData bool
	// SubsetNum/SubsetDen read only packs whose ID hashes into group
	// SubsetNum of SubsetDen (1-based), e.g. 2/7 for a weekly rotation;
	// SubsetDen == 0 reads all packs.
	SubsetNum, SubsetDen int
	// SubsetPercent reads a pseudo-random fraction of packs (0-100).
	SubsetPercent float64
	Progress      *Progress
	// MemoryBudget bounds the records sorted in memory (default 64 MiB);
	// the rest spills to TempDir.
	MemoryBudget int
	TempDir      string
	// NoRecord leaves the repository's damage record alone (a read-only
	// check, e.g. with credentials that cannot write).
	NoRecord bool
}

func (o *Options) defaults() {
	if o.MemoryBudget <= 0 {
		o.MemoryBudget = 64 << 20
	}
	if o.TempDir == "" {
		o.TempDir = os.TempDir()
	}
	if o.Progress == nil {
		o.Progress = &Progress{}
	}
}

// Progress counts verification work.
type Progress struct {
	PacksTotal atomic.Int64
	PacksDone  atomic.Int64
	BytesRead  atomic.Int64
}

// Affected names one disk of one backup point that lost data.
type Affected struct {
	Snapshot string `json:"snapshot"`
	Source   string `json:"source"`
	Disk     string `json:"disk"`
	// Offset is the first damaged byte offset (-1: the whole disk); Spans
	// counts the chunk-sized spans lost.
	Offset int64 `json:"offset"`
	Spans  int64 `json:"spans"`
}

// Problem is one finding.
type Problem struct {
	// Kind: config, key, manifest, disk-map, index-segment, missing-pack,
	// truncated-pack, pack-header, pack-trailer, unreadable-pack,
	// missing-chunk, corrupt-chunk, orphan-maps.
	Kind   string `json:"kind"`
	Object string `json:"object"`
	Detail string `json:"detail"`
	// DataLoss is true when a backup point lost data; false for metadata
	// damage that a repair mends without loss.
	DataLoss bool `json:"data_loss"`
	// Repair says what mends it.
	Repair  string     `json:"repair"`
	Affects []Affected `json:"affects,omitempty"`
}

// DamagedPoint is a backup point that lost data.
type DamagedPoint struct {
	Snapshot string   `json:"snapshot"`
	Source   string   `json:"source"`
	Disks    []string `json:"disks"`
}

// Report is the outcome.
type Report struct {
	Snapshots  int       `json:"snapshots"`
	Disks      int       `json:"disks"`
	Chunks     int64     `json:"chunks_referenced"`
	Packs      int       `json:"packs"`
	PacksRead  int       `json:"packs_read"`
	ChunksRead int64     `json:"chunks_read"`
	BytesRead  int64     `json:"bytes_read"`
	Problems   []Problem `json:"problems"`
	// Damaged are the points that lost data; every other point is intact.
	Damaged []DamagedPoint `json:"damaged_points"`
	Intact  int            `json:"intact_points"`
	// Repairs are the next steps, in the order to run them.
	Repairs []string `json:"repairs"`
	// Recorded counts broken chunk copies added to the damage record.
	Recorded int `json:"damage_recorded"`
	// Notices are findings that are not damage but need a decision.
	Notices []string `json:"notices"`
}

// OK reports a clean repository.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// DataLoss reports whether any backup point lost data.
func (r *Report) DataLoss() bool { return len(r.Damaged) > 0 }

// The repair steps, in the order verify recommends them.
const (
	repairConfig    = "coffer repair config"
	repairKeys      = "coffer repair keys"
	repairSnapshots = "coffer repair snapshots"
	repairIndex     = "coffer repair index"
	repairPacks     = "coffer repair packs"
	// Lost chunks come back only from their source.
	healByBackup = "back up the affected VMs or disks again: the next backup reads the lost spans from the source and stores them again, which mends every point that uses them (or `coffer forget` the affected points if the source is gone)"
)

var repairOrder = []string{repairConfig, repairKeys, repairIndex, repairPacks, repairSnapshots, healByBackup}

// Run verifies the repository.
func Run(ctx context.Context, r *repo.Repository, o Options) (*Report, error) {
	o.defaults()
	c := &checker{ctx: ctx, r: r, o: o, rep: &Report{Problems: []Problem{}, Damaged: []DamagedPoint{}, Repairs: []string{}, Notices: []string{}},
		badPacks: map[pack.ID]packTrouble{}, brokenAt: map[location]brokenCopy{}, lost: map[id.ID]string{},
		causes: map[string]*cause{}, pointsOf: map[id.ID][]string{}}
	c.openIssues()
	if err := c.manifests(); err != nil {
		return nil, err
	}
	refs, err := c.references()
	if err != nil {
		return nil, err
	}
	defer refs.Close()
	byPack, byID, err := c.sortIndex()
	if err != nil {
		return nil, err
	}
	defer byID.Close()
	if err := c.packs(byPack); err != nil {
		return nil, err
	}
	if err := c.chunks(refs, byID); err != nil {
		return nil, err
	}
	if err := c.recoverable(); err != nil {
		return nil, err
	}
	if err := c.trace(); err != nil {
		return nil, err
	}
	if err := c.record(); err != nil {
		return nil, err
	}
	c.summarise()
	return c.rep, nil
}

// selected decides whether a pack is read in a subset check.
func (o Options) selected(p pack.ID) bool {
	h := fnv.New32a()
	_, _ = h.Write(p[:])
	v := h.Sum32()
	switch {
	case o.SubsetDen > 0:
		return int(v%uint32(o.SubsetDen)) == o.SubsetNum-1
	case o.SubsetPercent > 0:
		return float64(v%10000) < o.SubsetPercent*100
	}
	return true
}

// summarise orders problems, lists damaged points and the repair steps.
func (c *checker) summarise() {
	rep := c.rep
	sort.SliceStable(rep.Problems, func(i, j int) bool {
		a, b := rep.Problems[i], rep.Problems[j]
		if a.DataLoss != b.DataLoss {
			return a.DataLoss
		}
		return a.Object < b.Object
	})
	byPoint := map[string]*DamagedPoint{}
	var order []string
	for _, p := range rep.Problems {
		for _, af := range p.Affects {
			dp := byPoint[af.Snapshot]
			if dp == nil {
				dp = &DamagedPoint{Snapshot: af.Snapshot, Source: af.Source}
				byPoint[af.Snapshot] = dp
				order = append(order, af.Snapshot)
			}
			if !contains(dp.Disks, af.Disk) {
				dp.Disks = append(dp.Disks, af.Disk)
			}
		}
	}
	sort.Strings(order)
	for _, s := range order {
		rep.Damaged = append(rep.Damaged, *byPoint[s])
	}
	rep.Intact = rep.Snapshots - len(rep.Damaged)
	need := map[string]bool{}
	for _, p := range rep.Problems {
		need[p.Repair] = true
		// Lost chunks come back only from their source.
		need[healByBackup] = need[healByBackup] || p.DataLoss && p.Kind != "disk-map"
	}
	for _, step := range repairOrder {
		if need[step] {
			rep.Repairs = append(rep.Repairs, step)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (c *checker) problem(p Problem) {
	c.rep.Problems = append(c.rep.Problems, p)
}

func errText(err error) string { return fmt.Sprint(err) }
