package volume

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/coffer-backup/coffer/internal/media"
	"github.com/coffer-backup/coffer/internal/media/format"
)

// Placed is a segment and the volume it is on: a row of the catalogue.
type Placed struct {
	Barcode string
	format.Segment
}

// Mounter loads a volume by barcode into a drive and mounts it.
type Mounter interface {
	Mount(ctx context.Context, barcode string) (*Volume, error)
}

// ReadOptions tune a positioned read.
type ReadOptions struct {
	// ReadThrough: a gap of up to this many blocks of other streams is
	// read and dropped instead of located over (a locate costs a
	// repositioning; a short gap streams faster).
	ReadThrough int64
}

// ReadStats count what a stream read cost.
type ReadStats struct {
	BlocksNeeded int64 // the stream's own blocks
	BlocksRead   int64 // every block read, the stream's and others'
	BytesRead    int64 // record bytes read from the drive
	Locates      int64
}

// ReadStream reads one stream, positioned by its catalogued segments, and
// writes its payload to w in order. Every block is checked: its checksum,
// its session, its stream and its sequence number; a stream whose
// segments leave a gap or lack its end is refused before anything is
// read.
func ReadStream(ctx context.Context, m Mounter, segs []Placed, w io.Writer, o ReadOptions) (ReadStats, error) {
	var st ReadStats
	segs = slices.Clone(segs)
	slices.SortFunc(segs, func(a, b Placed) int { return int(a.FirstSeq) - int(b.FirstSeq) })
	if err := checkComplete(segs); err != nil {
		return st, err
	}
	var v *Volume
	next := uint64(0)
	for _, s := range segs {
		if v == nil || v.Label.Barcode != s.Barcode {
			var err error
			if v, err = m.Mount(ctx, s.Barcode); err != nil {
				return st, fmt.Errorf("volume %s: %w", s.Barcode, err)
			}
			if v.pos, err = v.Drive.Tell(); err != nil {
				return st, err
			}
		}
		for _, e := range s.Extents {
			if err := ctx.Err(); err != nil {
				return st, err
			}
			if err := v.moveTo(e.Pos, o.ReadThrough, &st); err != nil {
				return st, fmt.Errorf("volume %s: %w", s.Barcode, err)
			}
			for range e.Count {
				h, p, err := v.readBlock()
				v.pos++
				st.BlocksRead++
				st.BytesRead += int64(v.Label.BlockSize)
				if err != nil {
					return st, fmt.Errorf("volume %s, block %d of point %s: %w", s.Barcode, v.pos-1, s.Point, err)
				}
				if h.Kind != format.KindData || h.Session != s.Session || h.Stream != s.Stream || h.Seq != next {
					return st, fmt.Errorf("volume %s, position %d: a %s block of session %s stream %d sequence %d where the catalogue has point %s's block %d: the catalogue does not match the volume",
						s.Barcode, v.pos-1, h.Kind, h.Session, h.Stream, h.Seq, s.Point, next)
				}
				st.BlocksNeeded++
				if _, err := w.Write(p); err != nil {
					return st, err
				}
				next++
			}
		}
	}
	return st, nil
}

// checkComplete refuses segments that do not make up a whole stream.
func checkComplete(segs []Placed) error {
	if len(segs) == 0 {
		return errors.New("the catalogue has no blocks of this stream")
	}
	want := uint64(0)
	for _, s := range segs {
		if s.FirstSeq != want {
			return fmt.Errorf("point %s: the catalogue lacks blocks %d to %d of its stream (a volume not catalogued?)", s.Point, want, s.FirstSeq-1)
		}
		want = s.LastSeq + 1
	}
	if !segs[len(segs)-1].End {
		return fmt.Errorf("point %s: the catalogue lacks the end of its stream after block %d (a volume not catalogued?)", segs[0].Point, want-1)
	}
	return nil
}

// moveTo positions the drive at pos: reading through a short forward gap,
// locating otherwise.
func (v *Volume) moveTo(pos, readThrough int64, st *ReadStats) error {
	gap := pos - v.pos
	if gap == 0 {
		return nil
	}
	if gap > 0 && gap <= readThrough {
		for ; v.pos < pos; v.pos++ {
			n, err := v.Drive.ReadRecord(v.buf)
			if err != nil && !errors.Is(err, media.ErrFilemark) {
				return err
			}
			if err == nil {
				st.BlocksRead++
				st.BytesRead += int64(n)
			}
		}
		return nil
	}
	st.Locates++
	if err := v.Drive.Locate(pos); err != nil {
		return err
	}
	v.pos = pos
	return nil
}
