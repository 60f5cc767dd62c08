package repo

import (
	"context"
	"fmt"
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

// AdoptPack stores a pack of another repository with the same master key
// whole: place copies its bytes under a pack name of this session, then
// its chunks are this session's like those of any pack it wrote. The
// caller owns the claim (see Claim) of every chunk in entries, which must
// be every blob of the pack (pack.Whole); retain locks the copy on
// backends with retention.
//
// The name is the point: it carries this session's prefix, so a kill
// between the copy and the index segment leaves a pack that the next
// session's RecoverDeadSessions indexes (and gc treats as this session's
// while its lease lives), and a re-run stores none of its chunks again.
func (w *Writer) AdoptPack(ctx context.Context, entries []index.Entry, claims []*Pending, retain time.Time, place PlacePack) (pack.ID, error) {
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
