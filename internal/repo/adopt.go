package repo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
)

// PlacePack puts a whole pack into this repository's store under name,
// without coffer reading or writing its bytes (a filesystem clone, an S3
// server-side copy). It returns the new object's description.
type PlacePack func(ctx context.Context, name string, opts store.PutOptions) (store.ObjectInfo, error)

// WholePack is a pack of a repository that holds exactly chunks a caller
// asked for (see WholePacks).
type WholePack struct {
	ID      PackID
	Size    int64
	entries []index.Entry
}

// Chunks are the pack's chunks.
func (p WholePack) Chunks() []id.ID {
	out := make([]id.ID, len(p.entries))
	for i, e := range p.entries {
		out[i] = e.ID
	}
	return out
}

// RawBytes is the plaintext size of the pack's chunks.
func (p WholePack) RawBytes() int64 {
	var n int64
	for _, e := range p.entries {
		n += int64(e.RawLength)
	}
	return n
}

// WholePacks sorts the packs holding the chunks in ids: those that hold
// nothing else (whole: a copy needing all of them can take the pack as it
// is), and how many also hold other chunks (partial). Whether a pack holds
// anything else is decided from the index and the pack's size alone
// (pack.Whole), without reading it. Chunks the index lacks are left out.
func (r *Repository) WholePacks(ctx context.Context, ids []id.ID) (whole []WholePack, partial int, err error) {
	byPack := map[pack.ID][]index.Entry{}
	for _, x := range ids {
		loc, found, err := r.Index().Lookup(ctx, x)
		if err != nil && !errors.Is(err, index.ErrFormat) && !errors.Is(err, store.ErrInvalidRange) {
			return nil, 0, err
		}
		if found {
			byPack[loc.Pack] = append(byPack[loc.Pack], index.Entry{ID: x, Location: loc})
		}
	}
	pids := make([]pack.ID, 0, len(byPack))
	for pid := range byPack {
		pids = append(pids, pid)
	}
	slices.SortFunc(pids, func(a, b pack.ID) int { return bytes.Compare(a[:], b[:]) })
	for _, pid := range pids {
		entries := byPack[pid]
		fi, err := r.st.Stat(ctx, pack.ObjectName(pid))
		if err != nil {
			partial++ // whoever reads its chunks reports the pack
			continue
		}
		pe := make([]pack.Entry, len(entries))
		for i, e := range entries {
			pe[i] = pack.Entry{ID: e.ID, Offset: e.Offset, Length: e.Length, RawLength: e.RawLength, Type: pack.TypeChunk}
		}
		if !pack.Whole(pe, fi.Size, r.key) {
			partial++
			continue
		}
		whole = append(whole, WholePack{ID: pid, Size: fi.Size, entries: entries})
	}
	return whole, partial, nil
}

// AdoptPack stores a whole pack (see WholePacks) of another repository
// with the same master key as it is: place copies its bytes under a pack
// name of this session, then its chunks are this session's like those of
// any pack it wrote. The caller owns the claim (see Claim) of every chunk
// of the pack, in the order of Chunks; retain locks the copy on backends
// with retention.
//
// The name is the point: it carries this session's prefix, so a kill
// between the copy and the index segment leaves a pack that the next
// session's RecoverDeadSessions indexes (and gc treats as this session's
// while its lease lives), and a re-run stores none of its chunks again.
func (w *Writer) AdoptPack(ctx context.Context, src WholePack, claims []*Pending, retain time.Time, place PlacePack) (pack.ID, error) {
	entries := src.entries
	if err := w.Err(); err != nil {
		return pack.ID{}, err
	}
	if len(claims) != len(entries) {
		return pack.ID{}, fmt.Errorf("adopt pack: %d claims for %d chunks", len(claims), len(entries))
	}
	pid := pack.MakeID(w.session, w.seq.Add(1))
	fi, err := place(ctx, pack.ObjectName(pid), store.PutOptions{RetainUntil: lockUntil(retain)})
	if err != nil {
		return pid, err
	}
	// A done pack of a stream that writes nothing: Sync finds it committed
	// and Retain knows how long it is locked.
	op := &openPack{id: pid, stream: &Stream{w: w, retain: lockUntil(retain)}, done: make(chan struct{})}
	close(op.done)
	var raw int64
	w.mu.Lock()
	for i, e := range entries {
		p := claims[i]
		if p == nil || p.id != e.ID {
			w.mu.Unlock()
			return pid, fmt.Errorf("adopt pack: chunk %s is not claimed", e.ID.Short())
		}
		p.pack = op
		p.loc = index.Location{Pack: pid, Offset: e.Offset, Length: e.Length, RawLength: e.RawLength}
		w.unflushed = append(w.unflushed, index.Entry{ID: e.ID, Location: p.loc})
		raw += int64(e.RawLength)
	}
	w.mu.Unlock()
	for _, p := range claims {
		p.markReady()
	}
	w.stored.Add(fi.Size)
	w.packsTotal.Add(1)
	w.newChunks.Add(int64(len(entries)))
	w.newRaw.Add(raw)
	return pid, nil
}

// ReleaseClaim gives back a claim its owner will not store after all
// (a pack it meant to adopt turned out not to be adoptable): the chunk is
// then claimed afresh by whoever stores it.
func (w *Writer) ReleaseClaim(p *Pending) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.pending[p.id] == p && p.pack == nil {
		delete(w.pending, p.id)
	}
}

// ChunkID is the chunk a claim is for.
func (p *Pending) ChunkID() id.ID { return p.id }
