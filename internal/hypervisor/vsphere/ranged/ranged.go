// Package ranged restores a disk as pieces of its allocated data, several
// at a time, straight into the target disk (for vSphere, a block device
// of the data mover the new VM's disk is hot-added to): holes are never
// sent. A fresh disk (thin, just created) already reads zeros there and
// stays thin; a disk that held data has its holes zeroed in place
// (Target.ZeroRange), which sends no bytes. Every piece done is
// journalled (Progress) once the target has flushed it, so a broken
// restore resumes at the first piece not done, within a retry policy
// (Retry) or when asked to (a VM's Record).
package ranged

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"golang.org/x/sync/errgroup"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

const (
	// PieceBytes is the unit of work and of progress: large enough that
	// the journal stays small, small enough that a break loses little.
	PieceBytes = 16 << 20
	// commitBytes of finished pieces are flushed and journalled together.
	commitBytes = 64 << 20
	// writeBuffer is what one stream holds in memory at a time.
	writeBuffer = 1 << 20
	// DefaultStreams write one disk at a time, and DefaultPerDatastore
	// into one datastore, unless the caller says otherwise.
	DefaultStreams      = 4
	DefaultPerDatastore = 8
)

// Target is the disk a ranged restore fills.
type Target interface {
	io.WriterAt
	// ZeroRange makes [off, off+n) read as zeros without sending them.
	ZeroRange(off, n int64) error
	// Sync makes everything written so far durable.
	Sync() error
}

// Piece is one unit of a ranged restore: data to copy, or (on a disk
// that is not fresh) a hole to zero.
type Piece struct {
	Off, Len int64
	Zero     bool
}

// Plan splits the allocated extents of a disk of size bytes into
// pieces no longer than PieceBytes, cut at multiples of PieceBytes so
// that the plan does not depend on the extents' own boundaries. With
// zeroHoles, the holes between them become zeroing pieces too.
func Plan(ext []hypervisor.Extent, size int64, zeroHoles bool) []Piece {
	var out []Piece
	add := func(off, end int64, zero bool) {
		for off < end {
			next := min(end, (off/PieceBytes+1)*PieceBytes)
			out = append(out, Piece{Off: off, Len: next - off, Zero: zero})
			off = next
		}
	}
	pos := int64(0)
	for _, e := range ext {
		start, end := max(e.Offset, pos), min(e.Offset+e.Length, size)
		if end <= start {
			continue
		}
		if zeroHoles {
			add(pos, start, true)
		}
		add(start, end, false)
		pos = end
	}
	if zeroHoles {
		add(pos, size, true)
	}
	return out
}

// Stats is what a ranged restore did.
type Stats struct {
	Written int64 // data bytes sent to the target in this run (pieces cut short by a break too)
	Zeroed  int64 // bytes of holes zeroed in place (none sent)
	Resumed int64 // data bytes a broken run had already written
	Pieces  int
}

// Add adds another attempt's figures to s.
func (s *Stats) Add(o Stats) {
	s.Written += o.Written
	s.Zeroed += o.Zeroed
	s.Resumed += o.Resumed
}

// Write copies src's pieces into dst with up to streams pieces in
// flight, each stream taking a slot from slots (the datastore's limit)
// while it writes. prog records what is done; pieces it already has are
// skipped.
func Write(ctx context.Context, dst Target, src hypervisor.DiskSource, pieces []Piece, streams int,
	slots chan struct{}, prog *Progress) (Stats, error) {
	var st Stats
	st.Pieces = len(pieces)
	var todo []int
	for i, p := range pieces {
		if prog.Done(i) {
			if !p.Zero {
				st.Resumed += p.Len
			}
			continue
		}
		todo = append(todo, i)
	}
	var next atomic.Int64
	var written, zeroed atomic.Int64
	c := &committer{dst: dst, prog: prog}
	g, gctx := errgroup.WithContext(ctx)
	for range max(1, min(streams, len(todo))) {
		g.Go(func() error {
			buf := make([]byte, writeBuffer)
			for {
				k := int(next.Add(1) - 1)
				if k >= len(todo) {
					return nil
				}
				i := todo[k]
				p := pieces[i]
				if err := withSlot(gctx, slots, func() error { return copyPiece(gctx, dst, src, p, buf, &written) }); err != nil {
					return err
				}
				if p.Zero {
					zeroed.Add(p.Len)
				}
				if err := c.finished(i, p.Len); err != nil {
					return err
				}
			}
		})
	}
	err := g.Wait()
	// What finished before a failure is kept: the next run skips it.
	err = errors.Join(err, c.flush())
	st.Written, st.Zeroed = written.Load(), zeroed.Load()
	return st, err
}

// withSlot runs f holding one of slots (nil: no limit).
func withSlot(ctx context.Context, slots chan struct{}, f func() error) error {
	if slots == nil {
		return f()
	}
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-slots }()
	return f()
}

// copyPiece writes one Piece through buf, adding what it sends to sent
// (a Piece cut short is sent again in full by the next run).
func copyPiece(ctx context.Context, dst Target, src hypervisor.DiskSource, p Piece, buf []byte, sent *atomic.Int64) error {
	if p.Zero {
		if err := dst.ZeroRange(p.Off, p.Len); err != nil {
			return fmt.Errorf("zero %d bytes at %d: %w", p.Len, p.Off, err)
		}
		return nil
	}
	for off := p.Off; off < p.Off+p.Len; {
		if err := ctx.Err(); err != nil {
			return err
		}
		b := buf[:min(int64(len(buf)), p.Off+p.Len-off)]
		n, err := src.ReadAt(b, off)
		if err != nil && !(err == io.EOF && n == len(b)) {
			return fmt.Errorf("read the point at %d: %w", off, err)
		}
		n, err = dst.WriteAt(b, off)
		sent.Add(int64(n))
		if err != nil {
			return fmt.Errorf("write %d bytes at %d: %w", len(b), off, err)
		}
		off += int64(len(b))
	}
	return nil
}

// committer journals finished pieces: every commitBytes, the target is
// flushed first, so that the journal never names a Piece the target
// could still lose.
type committer struct {
	dst     Target
	prog    *Progress
	mu      sync.Mutex
	pending []int
	bytes   int64
}

func (c *committer) finished(i int, n int64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending = append(c.pending, i)
	c.bytes += n
	if c.bytes < commitBytes {
		return nil
	}
	return c.commitLocked()
}

func (c *committer) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.commitLocked()
}

func (c *committer) commitLocked() error {
	if len(c.pending) == 0 {
		return nil
	}
	if err := c.dst.Sync(); err != nil {
		return fmt.Errorf("flush the restored disk: %w", err)
	}
	if err := c.prog.Record(c.pending); err != nil {
		return err
	}
	c.pending, c.bytes = c.pending[:0], 0
	return nil
}
