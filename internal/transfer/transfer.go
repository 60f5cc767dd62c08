// Package transfer copies backup points between repositories (local to S3,
// S3 to local, S3 to S3): the offsite / second-copy job.
//
// Only chunks the target lacks are written. When both repositories share
// the chunk-ID key (a target created with `coffer init --copy-keys-from`),
// chunk IDs are identical: the target is asked before anything is read from
// the source. With different keys every chunk is decrypted, re-hashed and
// re-encrypted for the target; to avoid reading whole disks again, spans
// unchanged since the previous point already copied reuse that copy's
// target IDs, so an incremental chain copies incrementally.
//
// When the two repositories share the whole master key, source packs the
// copy needs entirely are not read at all: the target's storage clones
// them or copies them server-side (adopt.go), and the rest goes chunk by
// chunk.
//
// A copied point keeps the source's lock (S3 Object Lock) unless the copy
// asks for a longer one (Options.RetainUntil): its manifest, disk maps and
// packs in the target are then locked like an immutable backup's.
//
// A copy runs as a normal write session on the target: killed at any
// instant, it leaves the target valid, and the next run reuses the packs it
// wrote. Each copied point keeps its snapshot ID.
package transfer

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
)

// Options select and tune a copy.
type Options struct {
	// Select picks source points to copy; nil copies all.
	Select   func(*repo.Point) bool
	Workers  int
	Progress *Progress
	// RetainUntil locks every copied point in the target until then (or
	// until the source's own lock, if later); zero carries the source's
	// lock over as it is.
	RetainUntil time.Time
	// NoOffload copies every chunk through coffer even where the target's
	// storage could copy whole packs itself: to measure what the offload
	// saves, and for storage whose copies misbehave.
	NoOffload bool
}

// Progress counts copy work.
type Progress struct {
	Snapshots atomic.Int64
	Chunks    atomic.Int64 // chunks written to the target
	Bytes     atomic.Int64 // plaintext bytes written to the target
}

// Result of a copy.
type Result struct {
	Copied        []string `json:"copied"`
	AlreadyThere  []string `json:"already_present"`
	ChunksRead    int64    `json:"chunks_read"`    // fetched from the source
	ChunksWritten int64    `json:"chunks_written"` // new in the target
	BytesWritten  int64    `json:"bytes_written"`  // sealed bytes added to the target
	ReEncrypted   bool     `json:"re_encrypted"`
	// Offload: how many of the chunks written came in whole packs the
	// storage copied (see adopt.go), and how.
	Offload Offload `json:"offload"`
}

// SameChunkIDs reports whether two keys produce identical chunk IDs.
func SameChunkIDs(a, b *crypto.Key) bool {
	return a.Encrypted() == b.Encrypted() && a.Master().ChunkID == b.Master().ChunkID
}

// Copy copies the selected points of src that dst does not have.
func Copy(ctx context.Context, src, dst *repo.Repository, o Options) (*Result, error) {
	res := &Result{ReEncrypted: !SameChunkIDs(src.Key(), dst.Key())}
	snaps, err := src.Points(ctx, nil)
	if err != nil {
		return nil, err
	}
	present := map[id.ID]bool{}
	ids, err := dst.ListPointIDs(ctx)
	if err != nil {
		return nil, err
	}
	for _, x := range ids {
		present[x] = true
	}
	lease, err := src.AcquireLease(ctx, "copy", "", "copy to "+dst.Store().Properties().Location, false)
	if err != nil {
		return nil, err
	}
	defer lease.Release(context.WithoutCancel(ctx))
	w, err := dst.NewWriter(ctx, "copy from "+src.Store().Properties().Location)
	if err != nil {
		return nil, err
	}
	c := &copier{src: src, dst: dst, w: w, o: o, res: res, copied: map[string]*repo.Point{}}
	var todo []*repo.Point
	for _, s := range snaps {
		if (o.Select == nil || o.Select(s)) && !present[s.ID] {
			todo = append(todo, s)
		}
	}
	if err := c.adoptWholePacks(ctx, todo); err != nil {
		_ = w.Close(context.WithoutCancel(ctx))
		return res, err
	}
	for _, s := range snaps {
		if o.Select != nil && !o.Select(s) {
			continue
		}
		if present[s.ID] {
			res.AlreadyThere = append(res.AlreadyThere, s.ID.String())
			c.copied[s.Source.Key()] = s
			continue
		}
		if err := c.copySnapshot(ctx, s); err != nil {
			_ = w.Close(context.WithoutCancel(ctx))
			return res, fmt.Errorf("snapshot %s: %w", s.ID.Short(), err)
		}
		res.Copied = append(res.Copied, s.ID.String())
		if o.Progress != nil {
			o.Progress.Snapshots.Add(1)
		}
	}
	return res, w.Close(ctx)
}

type copier struct {
	src, dst  *repo.Repository
	w         *repo.Writer
	o         Options
	res       *Result
	mu        sync.Mutex
	copied    map[string]*repo.Point // newest point per source present in both
	claims    map[id.ID]*repo.Pending
	retainFor time.Time
}

func (c *copier) copySnapshot(ctx context.Context, s *repo.Point) error {
	out := *s
	out.Disks = nil
	var deps []*repo.Pending
	prev := c.copied[s.Source.Key()]
	out.RetainUntil = c.lockFor(s)
	c.retainFor = out.RetainUntil
	for _, d := range s.Disks {
		m, err := c.src.OpenDiskMap(ctx, d.Map)
		if err != nil {
			return err
		}
		ids, dd, err := c.copyDisk(ctx, m, d, prev)
		if err != nil {
			return fmt.Errorf("disk %s: %w", d.Name, err)
		}
		deps = append(deps, dd...)
		if err := c.w.Retain(ctx, ids, out.RetainUntil); err != nil {
			return err
		}
		name, err := c.w.WriteDiskMap(ctx, m.DiskSize(), m.ChunkSize(), ids, out.RetainUntil)
		if err != nil {
			return err
		}
		nd := d
		nd.Map = name
		out.Disks = append(out.Disks, nd)
	}
	if err := c.w.Commit(ctx, &out, deps); err != nil {
		return err
	}
	c.copied[s.Source.Key()] = s
	return nil
}

// lockFor is how long the copy of s is locked in the target.
func (c *copier) lockFor(s *repo.Point) time.Time {
	lock := s.RetainUntil
	if o := c.o.RetainUntil; o.After(lock) {
		lock = o
	}
	if !lock.After(time.Now()) {
		return time.Time{} // a lock that has ended is not carried over (S3 refuses one in the past)
	}
	return lock
}

// copyDisk returns the target chunk IDs of a disk and the pending chunks
// the target point depends on.
func (c *copier) copyDisk(ctx context.Context, m *repo.DiskMap, d repo.Disk, prev *repo.Point) ([]id.ID, []*repo.Pending, error) {
	srcIDs, err := m.All(ctx)
	if err != nil {
		return nil, nil, err
	}
	dstIDs := make([]id.ID, len(srcIDs))
	reuse := make([]bool, len(srcIDs))
	var deps []*repo.Pending
	if c.res.ReEncrypted {
		if err := c.mapFromPrevious(ctx, prev, d, srcIDs, dstIDs, reuse); err != nil {
			return nil, nil, err
		}
	} else {
		// Same IDs: ask the target first and fetch only what it lacks.
		claimed := map[id.ID]bool{}
		for i, x := range srcIDs {
			dstIDs[i] = x
			if x.IsZero() || x == repo.LostChunk || claimed[x] {
				reuse[i] = true
				continue
			}
			p, owner, err := c.w.Claim(ctx, x)
			if err != nil {
				return nil, nil, err
			}
			if p != nil {
				deps = append(deps, p)
			}
			if !owner {
				reuse[i] = true
				continue
			}
			claimed[x] = true
			c.pending(x, p)
		}
	}
	st := c.w.NewRetainedStream(c.retainFor)
	encs := sync.Pool{New: func() any {
		e, err := c.dst.NewEncoder()
		if err != nil {
			panic(err)
		}
		return e
	}}
	hashers := sync.Pool{New: func() any { return c.dst.Key().NewHasher() }}
	var mu sync.Mutex
	err = restore.Chunks(ctx, c.src, m, c.o.Workers, func(i uint64) bool { return reuse[i] }, func(x id.ID, spans []uint64, plain []byte) error {
		atomic.AddInt64(&c.res.ChunksRead, 1)
		nx := x
		var p *repo.Pending
		owner := false
		if c.res.ReEncrypted {
			h := hashers.Get().(*crypto.Hasher)
			nx = h.Sum(plain)
			hashers.Put(h)
			var err error
			if p, owner, err = c.w.Claim(ctx, nx); err != nil {
				return err
			}
			if p != nil {
				mu.Lock()
				deps = append(deps, p)
				mu.Unlock()
			}
		} else {
			p, owner = c.takePending(x), true
		}
		for _, sp := range spans {
			dstIDs[sp] = nx
		}
		if !owner {
			return nil
		}
		e := encs.Get().(*repo.Encoder)
		defer encs.Put(e)
		sealed, _ := e.Encode(nil, plain)
		if err := st.Add(ctx, nx, sealed, len(plain), p); err != nil {
			return err
		}
		atomic.AddInt64(&c.res.ChunksWritten, 1)
		atomic.AddInt64(&c.res.BytesWritten, int64(len(sealed)))
		if c.o.Progress != nil {
			c.o.Progress.Chunks.Add(1)
			c.o.Progress.Bytes.Add(int64(len(plain)))
		}
		return nil
	})
	if ferr := st.Flush(context.WithoutCancel(ctx)); err == nil {
		err = ferr
	}
	return dstIDs, deps, err
}

// mapFromPrevious fills the target IDs of spans unchanged since prev, the
// newest point of the same source present in both repositories.
func (c *copier) mapFromPrevious(ctx context.Context, prev *repo.Point, d repo.Disk, srcIDs, dstIDs []id.ID, reuse []bool) error {
	for i, x := range srcIDs {
		// A span a repair recorded as lost stays lost in the copy.
		if reuse[i] = x.IsZero() || x == repo.LostChunk; reuse[i] {
			dstIDs[i] = x
		}
	}
	if prev == nil {
		return nil
	}
	var pd *repo.Disk
	for i := range prev.Disks {
		if prev.Disks[i].Key == d.Key && prev.Disks[i].Size == d.Size && prev.Disks[i].ChunkSize == d.ChunkSize {
			pd = &prev.Disks[i]
		}
	}
	if pd == nil {
		return nil
	}
	prevDst, err := c.dst.LoadPoint(ctx, prev.ID)
	if err != nil {
		return err
	}
	var dd *repo.Disk
	for i := range prevDst.Disks {
		if prevDst.Disks[i].Key == d.Key {
			dd = &prevDst.Disks[i]
		}
	}
	if dd == nil {
		return nil
	}
	srcPrev, err := loadIDs(ctx, c.src, pd.Map)
	if err != nil {
		return err
	}
	dstPrev, err := loadIDs(ctx, c.dst, dd.Map)
	if err != nil || len(srcPrev) != len(srcIDs) || len(dstPrev) != len(srcIDs) {
		return err
	}
	for i, x := range srcIDs {
		if !x.IsZero() && x != repo.LostChunk && srcPrev[i] == x {
			dstIDs[i], reuse[i] = dstPrev[i], true
		}
	}
	return nil
}

func loadIDs(ctx context.Context, r *repo.Repository, name string) ([]id.ID, error) {
	m, err := r.OpenDiskMap(ctx, name)
	if err != nil {
		return nil, err
	}
	return m.All(ctx)
}

// pending remembers the claim of a chunk to fetch (same-key copies).
func (c *copier) pending(x id.ID, p *repo.Pending) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.claims == nil {
		c.claims = map[id.ID]*repo.Pending{}
	}
	c.claims[x] = p
}

func (c *copier) takePending(x id.ID) *repo.Pending {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.claims[x]
	delete(c.claims, x)
	return p
}
