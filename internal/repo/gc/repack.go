package gc

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"

	"github.com/coffer-backup/coffer/internal/extsort"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/index"
	"github.com/coffer-backup/coffer/internal/repo/pack"
	"github.com/coffer-backup/coffer/internal/store"
)

// repackEntries caps the blobs of one new pack: its trailer (48 bytes a
// blob) is built in memory, and tiny, well-compressed chunks would
// otherwise put hundreds of thousands of them in one pack. Packs of
// ordinary chunks reach the pack size long before.
const repackEntries = 1 << 13

// repack copies the live chunks of packs marked for repacking into new
// packs (sealed bytes are copied as they are, no re-encryption) and
// indexes them in one segment. Entries come in pack and offset order: each
// old pack is read once.
func (p *planner) repack() error {
	var pk *packer
	var cur pack.ID
	var raw []byte
	var buf bytes.Buffer // reused: the old packs are read whole, one at a time
	err := p.forLive(func(e index.Entry, act action) error {
		if act != actRepack {
			return nil
		}
		if pk == nil {
			var err error
			if pk, err = newPacker(p.ctx, p.r, p.o); err != nil {
				return err
			}
		}
		if raw == nil || e.Pack != cur {
			if err := readPack(p.ctx, p.r, e.Pack, &buf); err != nil {
				return fmt.Errorf("repack %s: %w", e.Pack, err)
			}
			cur, raw = e.Pack, buf.Bytes()
			p.rep.PacksRepacked++
		}
		if int(e.Offset)+int(e.Length) > len(raw) {
			return fmt.Errorf("repack %s: blob beyond the end of the pack", e.Pack)
		}
		p.rep.BytesRepacked += int64(e.Length)
		return pk.add(e, raw[e.Offset:e.Offset+e.Length])
	})
	if pk == nil {
		return err
	}
	return pk.finish(err)
}

// readPack reads a whole pack into buf.
func readPack(ctx context.Context, r *repo.Repository, pid pack.ID, buf *bytes.Buffer) error {
	rc, err := r.Store().Read(ctx, pack.ObjectName(pid), 0, -1)
	if err != nil {
		return err
	}
	defer rc.Close()
	buf.Reset()
	_, err = buf.ReadFrom(rc)
	return err
}

// packer writes the repacked blobs into packs of a session of its own
// (under its lease, so that a kill leaves them to crash recovery like any
// session's), collects their index entries in an external sort, and
// writes them as one segment: nothing per chunk stays in memory beyond
// the pack being written.
type packer struct {
	ctx     context.Context
	r       *repo.Repository
	lease   *repo.Lease
	session pack.SessionPrefix
	seq     uint32
	obj     store.ObjectWriter
	pw      *pack.Writer
	pid     pack.ID
	moved   *extsort.Sorter // index records of the committed packs
}

func newPacker(ctx context.Context, r *repo.Repository, o Options) (*packer, error) {
	pk := &packer{ctx: ctx, r: r, moved: extsort.New(index.RecordSize, o.MemoryBudget, o.TempDir)}
	if _, err := rand.Read(pk.session[:]); err != nil {
		return nil, err
	}
	lease, err := r.AcquireLease(ctx, "gc repack", pk.session.String(), "garbage collection repack", false)
	if err != nil {
		pk.moved.Close()
		return nil, err
	}
	pk.lease = lease
	return pk, nil
}

func (pk *packer) add(e index.Entry, sealed []byte) error {
	if pk.obj == nil {
		pk.seq++
		pk.pid = pack.MakeID(pk.session, pk.seq)
		obj, err := pk.r.Store().Create(pk.ctx, pack.ObjectName(pk.pid), store.PutOptions{SizeHint: int64(pk.r.Config().PackSize)})
		if err != nil {
			return fmt.Errorf("create pack: %w", err)
		}
		if pk.pw == nil {
			pk.pw, err = pack.NewWriter(obj, pk.r.Key())
		} else {
			err = pk.pw.Reset(obj) // one writer for all packs: its buffers are reused
		}
		if err != nil {
			_ = obj.Abort()
			return fmt.Errorf("write pack header: %w", err)
		}
		pk.obj = obj
	}
	if _, err := pk.pw.Add(e.ID, sealed, int(e.RawLength)); err != nil {
		return fmt.Errorf("write pack %s: %w", pk.pid, err)
	}
	if pk.pw.Size() >= int64(pk.r.Config().PackSize) || pk.pw.Count() >= repackEntries {
		return pk.commit()
	}
	return nil
}

// commit finishes the current pack and records where its blobs are.
func (pk *packer) commit() error {
	pw, obj := pk.pw, pk.obj
	pk.obj = nil
	if err := pw.Finish(); err != nil {
		_ = obj.Abort()
		return err
	}
	if _, err := obj.Commit(); err != nil {
		return fmt.Errorf("commit pack %s: %w", pk.pid, err)
	}
	var rec [index.RecordSize]byte
	for _, b := range pw.Entries() {
		index.PutRecord(rec[:], index.Entry{ID: b.ID, Location: index.Location{Pack: pk.pid, Offset: b.Offset, Length: b.Length, RawLength: b.RawLength}})
		if err := pk.moved.Add(rec[:]); err != nil {
			return err
		}
	}
	return nil
}

// finish commits the last pack and indexes every pack written (unless err,
// the repack's failure, which it returns), then ends the session. Packs
// that are committed but not indexed are unreferenced copies, collected as
// orphans later.
func (pk *packer) finish(err error) error {
	if err == nil && pk.obj != nil {
		err = pk.commit()
	}
	if pk.obj != nil {
		_ = pk.obj.Abort()
	}
	if err == nil {
		err = pk.lease.Err()
	}
	if err == nil {
		err = pk.index()
	}
	pk.moved.Close()
	if rerr := pk.lease.Release(context.WithoutCancel(pk.ctx)); err == nil {
		err = rerr
	}
	return err
}

func (pk *packer) index() error {
	if pk.moved.Len() == 0 {
		return nil
	}
	out, err := index.CreateSegment(pk.ctx, pk.r.Store(), pk.r.Key(), int(pk.moved.Len()), nil)
	if err != nil {
		return err
	}
	if err := pk.moved.Iterate(false, func(r []byte) error { return out.Add(index.GetRecord(r)) }); err != nil {
		out.Abort()
		return err
	}
	seg, err := out.Commit(pk.ctx)
	if err != nil {
		return err
	}
	pk.r.Index().Add(seg)
	return nil
}
