package volume

import (
	"errors"
	"fmt"

	"github.com/coffer-backup/coffer/internal/media"
	"github.com/coffer-backup/coffer/internal/media/format"
)

// Report is what reading a whole volume back found.
type Report struct {
	Barcode      string
	Blocks       int64 // blocks read
	Bad          []BadBlock
	BadIndexed   int64 // bad blocks inside extents the index lists: data damaged
	Unindexed    int64 // good data blocks the index does not list (a session cut by a crash)
	Missing      int64 // blocks the index lists that are not on the volume as listed
	Scanned      []format.Segment
	IndexBlocks  int64 // data blocks the index lists
	IndexMatches bool
	found        map[int64]blockID // good data blocks by position
}

type blockID struct {
	s   format.SessionID
	st  uint32
	seq uint64
}

// BadBlock is a block that failed its check.
type BadBlock struct {
	Pos int64
	Err string
}

// Scan reads the volume from its beginning to its end of data, checking
// every block's checksum, and rebuilds the segments of every session found
// complete (with its end label) as the index should have them. It compares
// them with the volume's last index: Verify, and the catalogue rebuilt
// without the index (bscan).
func (v *Volume) Scan() (*Report, error) {
	r := &Report{Barcode: v.Label.Barcode, found: map[int64]blockID{}}
	if err := v.Drive.Rewind(); err != nil {
		return nil, err
	}
	open := map[streamKey]*format.Segment{} // segments of sessions not yet ended
	infos := map[format.SessionID]map[uint32]format.StreamInfo{}
	var order []streamKey
	for pos := int64(0); ; pos++ {
		h, p, err := v.readBlock()
		switch {
		case errors.Is(err, media.ErrEOD):
			r.finish(v, open)
			return r, nil
		case errors.Is(err, media.ErrFilemark):
			continue
		case err != nil:
			r.Bad = append(r.Bad, BadBlock{Pos: pos, Err: err.Error()})
			continue
		}
		r.Blocks++
		switch h.Kind {
		case format.KindSessionStart:
			l, err := format.DecodeSessionLabel(p)
			if err != nil {
				r.Bad = append(r.Bad, BadBlock{Pos: pos, Err: err.Error()})
				continue
			}
			m := map[uint32]format.StreamInfo{}
			for _, s := range l.Streams {
				m[s.Stream] = s
			}
			infos[l.Session] = m
			// Blocks of another session still open were cut by a crash:
			// never catalogued, and overwritten or skipped by the append.
			for k, s := range open {
				if k.s != l.Session {
					r.Unindexed += s.Blocks()
					delete(open, k)
				}
			}
		case format.KindSessionEnd, format.KindIndex:
			// A session's blocks on this volume end at its end label or
			// at the index that closes a full volume.
			var sid format.SessionID
			if h.Kind == format.KindSessionEnd {
				l, err := format.DecodeSessionLabel(p)
				if err != nil {
					r.Bad = append(r.Bad, BadBlock{Pos: pos, Err: err.Error()})
					continue
				}
				sid = l.Session
			}
			for _, k := range order {
				if s := open[k]; s != nil && (h.Kind == format.KindIndex || k.s == sid) {
					r.Scanned = append(r.Scanned, *s)
					delete(open, k)
				}
			}
		case format.KindData:
			k := streamKey{h.Session, h.Stream}
			s := open[k]
			if s == nil {
				info, ok := infos[h.Session][h.Stream]
				if !ok {
					r.Unindexed++
					continue
				}
				s = &format.Segment{StreamInfo: info, Session: h.Session, FirstSeq: h.Seq}
				open[k] = s
				order = append(order, k)
			}
			r.found[pos] = blockID{h.Session, h.Stream, h.Seq}
			if h.Seq <= s.LastSeq && len(s.Extents) > 0 {
				r.Bad = append(r.Bad, BadBlock{Pos: pos, Err: fmt.Sprintf("stream %d: block %d after %d", h.Stream, h.Seq, s.LastSeq)})
				continue
			}
			// A block number skipped is a block that could not be read
			// (listed as bad already): the stream goes on after it.
			if k := len(s.Extents) - 1; k >= 0 && s.Extents[k].Pos+s.Extents[k].Count == pos {
				s.Extents[k].Count++
			} else {
				s.Extents = append(s.Extents, format.Extent{Pos: pos, Count: 1})
			}
			s.LastSeq = h.Seq
			s.Bytes += int64(h.Length)
			s.End = h.Flags&format.FlagEndOfStream != 0
		}
	}
}

type streamKey struct {
	s  format.SessionID
	st uint32
}

// finish counts the blocks of sessions that never ended (cut by a crash)
// as unindexed, and checks every block the index lists: found where it
// says, or missing; a bad block inside its extents is damage.
func (r *Report) finish(v *Volume, open map[streamKey]*format.Segment) {
	for _, s := range open {
		r.Unindexed += s.Blocks()
	}
	bad := map[int64]bool{}
	for _, b := range r.Bad {
		bad[b.Pos] = true
	}
	for _, ix := range v.Index.Segments {
		seq := ix.FirstSeq
		for _, e := range ix.Extents {
			for pos := e.Pos; pos < e.Pos+e.Count; pos, seq = pos+1, seq+1 {
				r.IndexBlocks++
				if bad[pos] {
					r.BadIndexed++
				}
				if r.found[pos] != (blockID{ix.Session, ix.Stream, seq}) {
					r.Missing++
				}
			}
		}
	}
	r.IndexMatches = r.Missing == 0 && r.BadIndexed == 0
}
