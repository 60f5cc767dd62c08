package transfer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
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
	BytesAdopted  int64 `json:"adopted_bytes"`
	// PacksPartial source packs were only partly needed (or partly in the
	// target already): their chunks took the chunk path.
	PacksPartial int64 `json:"packs_partial"`
	// Unavailable says why packs were not (or, from some pack on, no
	// longer) copied whole: different keys, a store without copies, a
	// source the target's storage cannot copy from, --no-offload.
	Unavailable string `json:"unavailable,omitempty"`
}

// adoptWholePacks adopts every source pack that the points in todo need
// entirely and the target lacks entirely, before any chunk is copied.
func (c *copier) adoptWholePacks(ctx context.Context, todo []*repo.Point) error {
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
	lacking := make([]id.ID, 0, len(need))
	for x := range need {
		if _, found, err := c.dst.Index().Lookup(ctx, x); err == nil && found {
			continue // in the target already
		}
		lacking = append(lacking, x)
	}
	whole, partial, err := c.src.WholePacks(ctx, lacking)
	if err != nil {
		return err
	}
	off.PacksPartial = int64(partial)
	for _, p := range whole {
		done, err := c.adoptPack(ctx, cp, p, need)
		if errors.Is(err, errors.ErrUnsupported) {
			off.Unavailable = err.Error()
			c.src.Logger().Info("the target's storage cannot copy packs of this source; copying chunk by chunk", "err", err)
			return nil
		}
		if err != nil {
			return fmt.Errorf("adopt pack %s: %w", p.ID, err)
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
func (c *copier) neededChunks(ctx context.Context, todo []*repo.Point) (map[id.ID]time.Time, error) {
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

// adoptPack adopts one whole source pack unless the target has (or this
// session claimed) some of its chunks meanwhile; it reports whether it
// did.
func (c *copier) adoptPack(ctx context.Context, cp objectCopier, p repo.WholePack, need map[id.ID]time.Time) (bool, error) {
	chunks := p.Chunks()
	claims := make([]*repo.Pending, 0, len(chunks))
	release := func() {
		for _, q := range claims {
			c.w.ReleaseClaim(q)
		}
	}
	var lock time.Time
	for _, x := range chunks {
		q, owner, err := c.w.Claim(ctx, x)
		if err != nil {
			release()
			return false, err
		}
		if !owner {
			release()
			return false, nil // take only what the target lacks, chunk by chunk
		}
		claims = append(claims, q)
		if t := need[x]; t.After(lock) {
			lock = t
		}
	}
	var method store.CopyMethod
	srcName := repo.PackObjectName(p.ID)
	_, err := c.w.AdoptPack(ctx, p, claims, lock, func(ctx context.Context, name string, opts store.PutOptions) (store.ObjectInfo, error) {
		fi, m, err := cp.CopyFrom(ctx, c.src.Store(), srcName, name, opts)
		method = m
		return fi, err
	})
	if err != nil {
		release()
		return false, err
	}
	off := &c.res.Offload
	if off.Method == "" || !method.Offloaded() {
		off.Method = string(method) // a fallback on any pack is what the operator must see
	}
	off.PacksAdopted++
	off.ChunksAdopted += int64(len(chunks))
	off.BytesAdopted += p.Size
	c.res.ChunksWritten += int64(len(chunks))
	c.res.BytesWritten += p.Size
	if c.o.Progress != nil {
		c.o.Progress.Chunks.Add(int64(len(chunks)))
		c.o.Progress.Bytes.Add(p.RawBytes())
	}
	return true, nil
}
