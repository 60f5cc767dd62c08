package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
)

// Copy offload (VAAI's full copy). When the source and the target share
// the whole master key, a source pack is readable in the target byte for
// byte: its blobs and its trailer are sealed with the same key, and
// nothing in a pack names the pack. A pack every chunk of which this copy
// needs and the target lacks is therefore taken whole: the target's store
// clones it (FICLONE on one filesystem) or has the S3 service copy it
// (CopyObject), and only its index entries are written by coffer. Packs
// only partly needed, and every copy the storage cannot make, take the
// chunk path (read, write through the target's packs).

// objectCopier is a target store that can copy an object of another
// store without coffer moving its bytes: internal/store/local (clone,
// kernel copy), internal/store/s3 (server-side copy). It returns
// errors.ErrUnsupported for a source it cannot copy from.
type objectCopier interface {
	CopyFrom(ctx context.Context, from store.Store, fromName, name string, opts store.PutOptions) (store.ObjectInfo, store.CopyMethod, error)
}

// findCopier looks for the copy capability down a chain of decorators.
func findCopier(s store.Store) (objectCopier, bool) {
	for {
		if c, ok := s.(objectCopier); ok {
			return c, true
		}
		u, ok := s.(interface{ Unwrap() store.Store })
		if !ok {
			return nil, false
		}
		s = u.Unwrap()
	}
}

// SameMasterKey reports whether two keys seal and open blobs alike and
// produce the same chunk IDs: then a pack moves between the repositories
// as it is.
func SameMasterKey(a, b *crypto.Key) bool {
	am, bm := a.Master(), b.Master()
	return a.Encrypted() == b.Encrypted() && bytes.Equal(am.Encryption[:], bm.Encryption[:]) && bytes.Equal(am.ChunkID[:], bm.ChunkID[:])
}

// Offload says how the packs of a copy moved.
type Offload struct {
	// Method is how the adopted packs were copied (store.CopyMethod); ""
	// when none was.
	Method string `json:"method,omitempty"`
	// PacksAdopted packs were copied whole, holding ChunksAdopted chunks
	// in BytesAdopted bytes.
	PacksAdopted  int64 `json:"packs_adopted"`
	ChunksAdopted int64 `json:"chunks_adopted"`
	BytesAdopted  int64 `json:"bytes_adopted"`
	// PacksPartial source packs were only partly needed (or partly in the
	// target already): their chunks took the chunk path.
	PacksPartial int64 `json:"packs_partial"`
	// Unavailable says why no pack could be adopted at all ("" when packs
	// could be: different keys, a store without copies, --no-offload).
	Unavailable string `json:"unavailable,omitempty"`
}

// adoptWholePacks adopts every source pack that the points in todo need
// entirely and the target lacks entirely, before any chunk is copied.
func (c *copier) adoptWholePacks(ctx context.Context, todo []*repo.Snapshot) error {
	off := &c.res.Offload
	cp, why := c.offloadable()
	if cp == nil {
		off.Unavailable = why
		return nil
	}
	need, err := c.neededChunks(ctx, todo)
	if err != nil {
		return err
	}
	byPack := map[pack.ID][]index.Entry{}
	for x := range need {
		if _, found, err := c.dst.Index().Lookup(ctx, x); err == nil && found {
			continue // in the target already
		}
		loc, found, err := c.src.Index().Lookup(ctx, x)
		if err != nil || !found {
			continue // the chunk path reports it
		}
		byPack[loc.Pack] = append(byPack[loc.Pack], index.Entry{ID: x, Location: loc})
	}
	pids := make([]pack.ID, 0, len(byPack))
	for pid := range byPack {
		pids = append(pids, pid)
	}
	slices.SortFunc(pids, func(a, b pack.ID) int { return bytes.Compare(a[:], b[:]) })
	for _, pid := range pids {
		done, err := c.adoptPack(ctx, cp, pid, byPack[pid], need)
		if errors.Is(err, errors.ErrUnsupported) {
			off.Unavailable = err.Error()
			c.src.Logger().Info("the target's storage cannot copy packs of this source; copying chunk by chunk", "err", err)
			return nil
		}
		if err != nil {
			return fmt.Errorf("adopt pack %s: %w", pid, err)
		}
		if !done {
			off.PacksPartial++
		}
	}
	return nil
}

// offloadable returns the target's copier, or why packs cannot be adopted.
func (c *copier) offloadable() (objectCopier, string) {
	switch {
	case c.o.NoOffload:
		return nil, "offload turned off (--no-offload)"
	case !SameMasterKey(c.src.Key(), c.dst.Key()):
		return nil, "the repositories have different master keys"
	}
	cp, ok := findCopier(c.dst.Store())
	if !ok {
		return nil, "the target's storage cannot copy objects"
	}
	return cp, ""
}

// neededChunks maps each chunk the points in todo reference to the
// longest lock any of them asks for.
func (c *copier) neededChunks(ctx context.Context, todo []*repo.Snapshot) (map[id.ID]time.Time, error) {
	need := map[id.ID]time.Time{}
	for _, s := range todo {
		lock := c.lockFor(s)
		for _, d := range s.Disks {
			ids, err := loadIDs(ctx, c.src, d.Map)
			if err != nil {
				return nil, fmt.Errorf("snapshot %s disk %s: %w", s.ID.Short(), d.Name, err)
			}
			for _, x := range ids {
				if x.IsZero() || x == repo.LostChunk {
					continue
				}
				if t, ok := need[x]; !ok || lock.After(t) {
					need[x] = lock
				}
			}
		}
	}
	return need, nil
}

// adoptPack adopts one source pack if it can be taken whole; it reports
// whether it was.
func (c *copier) adoptPack(ctx context.Context, cp objectCopier, pid pack.ID, entries []index.Entry, need map[id.ID]time.Time) (bool, error) {
	srcName := pack.ObjectName(pid)
	fi, err := c.src.Store().Stat(ctx, srcName)
	if err != nil {
		return false, nil // the chunk path reads (or reports) its chunks
	}
	pe := make([]pack.Entry, len(entries))
	for i, e := range entries {
		pe[i] = pack.Entry{ID: e.ID, Offset: e.Offset, Length: e.Length, RawLength: e.RawLength, Type: pack.TypeChunk}
	}
	if !pack.Whole(pe, fi.Size, c.src.Key()) {
		return false, nil // it holds chunks this copy does not need
	}
	claims := make([]*repo.Pending, 0, len(entries))
	var lock time.Time
	for _, e := range entries {
		p, owner, err := c.w.Claim(ctx, e.ID)
		if err == nil && !owner {
			err = errPresent
		}
		if err != nil {
			for _, q := range claims {
				c.w.ReleaseClaim(q)
			}
			if errors.Is(err, errPresent) {
				return false, nil // the target has some of it: take only what it lacks
			}
			return false, err
		}
		claims = append(claims, p)
		if t := need[e.ID]; t.After(lock) {
			lock = t
		}
	}
	var method store.CopyMethod
	var size int64
	_, err = c.w.AdoptPack(ctx, entries, claims, lock, func(ctx context.Context, name string, opts store.PutOptions) (store.ObjectInfo, error) {
		fi, m, err := cp.CopyFrom(ctx, c.src.Store(), srcName, name, opts)
		method, size = m, fi.Size
		return fi, err
	})
	if err != nil {
		for _, q := range claims {
			c.w.ReleaseClaim(q)
		}
		return false, err
	}
	off := &c.res.Offload
	if off.Method == "" || !method.Offloaded() {
		off.Method = string(method) // a fallback on any pack is what the operator must see
	}
	off.PacksAdopted++
	off.ChunksAdopted += int64(len(entries))
	off.BytesAdopted += size
	c.res.ChunksWritten += int64(len(entries))
	c.res.BytesWritten += size
	if c.o.Progress != nil {
		c.o.Progress.Chunks.Add(int64(len(entries)))
		for _, e := range entries {
			c.o.Progress.Bytes.Add(int64(e.RawLength))
		}
	}
	return true, nil
}

var errPresent = errors.New("chunk present in the target")
