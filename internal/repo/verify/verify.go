// Package verify checks a repository. The structural check reads every
// manifest, disk map and index segment and confirms that every chunk a
// backup needs is indexed and that every indexed pack exists with the size
// the index implies. With ReadData it also downloads packs, decrypts every
// blob and re-hashes it against its chunk ID.
//
// Every problem is reported with the backup points and disks it affects
// (and the byte offsets within them), so one bad chunk never casts doubt on
// the rest of the repository.
package verify

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/diskmap"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
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
}

// Progress counts verification work.
type Progress struct {
	PacksTotal atomic.Int64
	PacksDone  atomic.Int64
	BytesRead  atomic.Int64
}

// Affected names one place a damaged chunk is used.
type Affected struct {
	Snapshot string `json:"snapshot"`
	Source   string `json:"source"`
	Disk     string `json:"disk"`
	Offset   int64  `json:"offset"`
}

// Problem is one finding.
type Problem struct {
	Kind     string     `json:"kind"` // "manifest", "disk-map", "index", "missing-chunk", "missing-pack", "truncated-pack", "corrupt-chunk", "pack"
	Object   string     `json:"object"`
	Detail   string     `json:"detail"`
	Affects  []Affected `json:"affects,omitempty"`
	affectID []id.ID    // chunks to trace back to backups
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
}

// OK reports a clean repository.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// Run verifies the repository.
func Run(ctx context.Context, r *repo.Repository, o Options) (*Report, error) {
	rep := &Report{}
	for _, seg := range r.DamagedIndexSegments() {
		rep.Problems = append(rep.Problems, Problem{Kind: "index", Object: seg, Detail: "segment is damaged and was skipped; run `coffer repair index`"})
	}
	var mu sync.Mutex
	snaps, err := r.Snapshots(ctx, func(x id.ID, err error) {
		mu.Lock()
		rep.Problems = append(rep.Problems, Problem{Kind: "manifest", Object: "snapshots/" + x.String(), Detail: err.Error()})
		mu.Unlock()
	})
	if err != nil {
		return nil, err
	}
	rep.Snapshots = len(snaps)
	packSizes, err := listPacks(ctx, r)
	if err != nil {
		return nil, err
	}
	rep.Packs = len(packSizes)
	// Every indexed pack must exist and be long enough for its entries.
	needEnd := map[pack.ID]int64{}
	err = r.Index().Iterate(ctx, func(e index.Entry) error {
		end := int64(e.Offset) + int64(e.Length)
		if end > needEnd[e.Pack] {
			needEnd[e.Pack] = end
		}
		return nil
	})
	if err != nil {
		rep.Problems = append(rep.Problems, Problem{Kind: "index", Object: "index/", Detail: err.Error()})
	}
	badPacks := map[pack.ID]string{}
	for p, end := range needEnd {
		size, ok := packSizes[p]
		switch {
		case !ok:
			badPacks[p] = "missing-pack"
		case size < end+8:
			badPacks[p] = "truncated-pack"
		}
	}
	// Walk every disk map: each chunk must be indexed, in a healthy pack.
	chunkProblems := map[id.ID]string{}
	for _, s := range snaps {
		for _, d := range s.Disks {
			rep.Disks++
			m, err := diskmap.Open(ctx, r.Store(), r.Key(), d.Map)
			if err != nil {
				rep.Problems = append(rep.Problems, Problem{Kind: "disk-map", Object: d.Map, Detail: err.Error(),
					Affects: []Affected{{Snapshot: s.ID.Short(), Source: s.Source.VMName, Disk: d.Name, Offset: -1}}})
				continue
			}
			err = m.Iterate(ctx, func(_ uint64, x id.ID) error {
				if x.IsZero() {
					return nil
				}
				rep.Chunks++
				loc, ok, err := r.Index().Lookup(ctx, x)
				if err != nil {
					return err
				}
				if !ok {
					chunkProblems[x] = "missing-chunk"
				} else if kind, bad := badPacks[loc.Pack]; bad {
					chunkProblems[x] = kind
				}
				return nil
			})
			if err != nil {
				rep.Problems = append(rep.Problems, Problem{Kind: "disk-map", Object: d.Map, Detail: err.Error(),
					Affects: []Affected{{Snapshot: s.ID.Short(), Source: s.Source.VMName, Disk: d.Name, Offset: -1}}})
			}
		}
	}
	for p, kind := range badPacks {
		rep.Problems = append(rep.Problems, Problem{Kind: kind, Object: pack.ObjectName(p), Detail: packDetail(kind)})
	}
	if o.ReadData {
		corrupt, err := readData(ctx, r, packSizes, needEnd, badPacks, o, rep)
		if err != nil {
			return nil, err
		}
		for x, detail := range corrupt {
			chunkProblems[x] = "corrupt-chunk: " + detail
		}
	}
	if len(chunkProblems) > 0 {
		traceChunks(ctx, r, snaps, chunkProblems, rep)
	}
	sort.Slice(rep.Problems, func(i, j int) bool { return rep.Problems[i].Object < rep.Problems[j].Object })
	return rep, nil
}

func packDetail(kind string) string {
	if kind == "missing-pack" {
		return "pack is listed in the index but does not exist"
	}
	return "pack is shorter than its indexed contents"
}

func listPacks(ctx context.Context, r *repo.Repository) (map[pack.ID]int64, error) {
	out := map[pack.ID]int64{}
	err := r.Store().List(ctx, "data/", func(fi store.ObjectInfo) error {
		p, err := pack.ParseObjectName(fi.Name)
		if err == nil {
			out[p] = fi.Size
		}
		return nil
	})
	return out, err
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

// readData reads selected packs, checks their trailer against the index
// and every blob against its chunk ID. It returns damaged chunk IDs.
func readData(ctx context.Context, r *repo.Repository, sizes map[pack.ID]int64, indexed map[pack.ID]int64, bad map[pack.ID]string, o Options, rep *Report) (map[id.ID]string, error) {
	var packs []pack.ID
	for p := range indexed {
		if _, isBad := bad[p]; !isBad && o.selected(p) {
			packs = append(packs, p)
		}
	}
	sort.Slice(packs, func(i, j int) bool { return string(packs[i][:]) < string(packs[j][:]) })
	if o.Progress != nil {
		o.Progress.PacksTotal.Store(int64(len(packs)))
	}
	corrupt := map[id.ID]string{}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(r.Store().Properties().Connections, 2))
	for _, p := range packs {
		g.Go(func() error {
			found, chunks, n, err := checkPack(gctx, r, p, sizes[p])
			mu.Lock()
			defer mu.Unlock()
			rep.PacksRead++
			rep.ChunksRead += chunks
			rep.BytesRead += n
			if o.Progress != nil {
				o.Progress.PacksDone.Add(1)
				o.Progress.BytesRead.Add(n)
			}
			if err != nil {
				if errors.Is(err, context.Canceled) {
					return err
				}
				rep.Problems = append(rep.Problems, Problem{Kind: "pack", Object: pack.ObjectName(p), Detail: err.Error()})
			}
			for x, d := range found {
				corrupt[x] = d
			}
			return nil
		})
	}
	return corrupt, g.Wait()
}

// checkPack reads one pack whole and verifies every blob the index says is
// in it. A trailer that cannot be read makes every indexed chunk of the pack
// suspect, found through the index.
func checkPack(ctx context.Context, r *repo.Repository, p pack.ID, size int64) (map[id.ID]string, int64, int64, error) {
	raw, err := store.Get(ctx, r.Store(), pack.ObjectName(p), 0, size)
	if err != nil {
		return nil, 0, 0, err
	}
	n := int64(len(raw))
	entries, terr := pack.ReadTrailer(func(off, l int64) ([]byte, error) {
		if off < 0 || off+l > int64(len(raw)) {
			return nil, store.ErrInvalidRange
		}
		return raw[off : off+l], nil
	}, int64(len(raw)), r.Key())
	if herr := pack.CheckHeader(raw); herr != nil && terr == nil {
		terr = herr
	}
	dec, err := r.NewDecoder()
	if err != nil {
		return nil, 0, n, err
	}
	found := map[id.ID]string{}
	var chunks int64
	var buf []byte
	if terr != nil {
		// Fall back to the index's view of the pack.
		_ = r.Index().Iterate(ctx, func(e index.Entry) error {
			if e.Pack == p {
				entries = append(entries, pack.Entry{ID: e.ID, Offset: e.Offset, Length: e.Length, RawLength: e.RawLength})
			}
			return nil
		})
	}
	for _, e := range entries {
		chunks++
		end := int64(e.Offset) + int64(e.Length)
		if end > int64(len(raw)) {
			found[e.ID] = "blob extends past the end of the pack"
			continue
		}
		if buf, err = dec.Decode(buf[:0], raw[e.Offset:end], e.ID, int(e.RawLength)); err != nil {
			found[e.ID] = err.Error()
		}
	}
	if terr != nil {
		return found, chunks, n, fmt.Errorf("pack trailer unreadable: %w", terr)
	}
	return found, chunks, n, nil
}

// traceChunks finds every backup point and disk offset using a bad chunk.
func traceChunks(ctx context.Context, r *repo.Repository, snaps []*repo.Snapshot, bad map[id.ID]string, rep *Report) {
	byChunk := map[id.ID][]Affected{}
	for _, s := range snaps {
		for _, d := range s.Disks {
			m, err := diskmap.Open(ctx, r.Store(), r.Key(), d.Map)
			if err != nil {
				continue // already reported
			}
			_ = m.Iterate(ctx, func(i uint64, x id.ID) error {
				if _, ok := bad[x]; ok {
					byChunk[x] = append(byChunk[x], Affected{Snapshot: s.ID.Short(), Source: s.Source.VMName, Disk: d.Name, Offset: int64(i) * int64(m.ChunkSize())})
				}
				return nil
			})
		}
	}
	for x, detail := range bad {
		kind, rest, _ := strings.Cut(detail, ": ")
		p := Problem{Kind: kind, Object: "chunk " + x.String(), Detail: rest, Affects: byChunk[x]}
		if rest == "" {
			p.Detail = "chunk is not in any index segment"
			if kind != "missing-chunk" {
				p.Detail = "chunk lives in a " + strings.TrimSuffix(kind, "-pack") + " pack"
			}
		}
		rep.Problems = append(rep.Problems, p)
	}
}
