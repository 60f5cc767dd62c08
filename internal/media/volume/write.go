package volume

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/coffer-backup/coffer/internal/media"
	"github.com/coffer-backup/coffer/internal/media/format"
)

// DefaultMultiplex is how many streams share a drive unless asked
// otherwise: NetBackup's advice, which the seeds measured, is not to go
// beyond 4:1 (restores slow down), and 2:1 did best.
const DefaultMultiplex = 4

// Source is one stream of a session: a backup point's bytes.
type Source struct {
	Info format.StreamInfo // Stream is assigned by WriteSession
	Open func(ctx context.Context) (io.ReadCloser, error)
}

// Volumes supplies the next volume when one is full.
type Volumes interface {
	// Next unloads the full volume and returns another of the same pool,
	// mounted.
	Next(ctx context.Context, full *Volume) (*Volume, error)
}

// WriteOptions tune a session.
type WriteOptions struct {
	// Multiplex is how many streams are written at once.
	Multiplex int
	// RunBlocks keeps this many consecutive blocks of one stream together
	// (a spool in memory): fewer, longer extents make a restore of one
	// stream read less of the others.
	RunBlocks int
	// Retention protects the volumes written from being overwritten.
	Retention time.Duration
	Host      string
}

// WriteResult says what a session wrote.
type WriteResult struct {
	Session format.SessionID
	// Volumes are the indexes of the volumes written, as written on them
	// (or, after an unexpected end of medium, as they should have been).
	Volumes []format.VolumeIndex
	Blocks  int64
	Bytes   int64 // payload bytes
	// NoIndex lists volumes that ended before their index could be
	// written.
	NoIndex []string
}

type piece struct {
	stream   int
	payloads [][]byte
	eos      bool
	err      error
}

// WriteSession writes sources as one session, multiplexed block by block
// (or run by run), starting on v and continuing on volumes from vols.
// Nothing of it is in a volume's index until the session is complete, so a
// session cut by a crash is never catalogued.
func WriteSession(ctx context.Context, v *Volume, vols Volumes, sources []Source, o WriteOptions) (*WriteResult, error) {
	if o.Multiplex <= 0 {
		o.Multiplex = DefaultMultiplex
	}
	if o.RunBlocks <= 0 {
		o.RunBlocks = 1
	}
	if len(sources) == 0 {
		return nil, errors.New("nothing to write")
	}
	w := &sessionWriter{v: v, vols: vols, o: o, res: &WriteResult{}}
	_, _ = rand.Read(w.res.Session[:])
	w.label = format.SessionLabel{Session: w.res.Session, Time: time.Now().UTC(), Host: o.Host}
	for i := range sources {
		sources[i].Info.Stream = uint32(i + 1)
		w.label.Streams = append(w.label.Streams, sources[i].Info)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pieces := make(chan piece, o.Multiplex)
	go produce(ctx, sources, format.Payload(v.Label.BlockSize), o, pieces)
	if err := w.start(ctx, false); err != nil {
		return nil, err
	}
	seqs := make([]uint64, len(sources))
	for left := len(sources); left > 0; {
		var p piece
		select {
		case p = <-pieces:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if p.err != nil {
			return nil, fmt.Errorf("stream of point %s: %w", sources[p.stream].Info.Point, p.err)
		}
		for j, payload := range p.payloads {
			h := format.Header{Kind: format.KindData, Stream: uint32(p.stream + 1), Session: w.res.Session, Seq: seqs[p.stream]}
			if p.eos && j == len(p.payloads)-1 {
				h.Flags = format.FlagEndOfStream
			}
			if err := w.writeData(ctx, h, payload, sources[p.stream].Info); err != nil {
				return nil, err
			}
			seqs[p.stream]++
		}
		if p.eos {
			left--
		}
	}
	if err := w.end(false); err != nil {
		return nil, err
	}
	return w.res, nil
}

// produce reads the sources, at most o.Multiplex at a time, cutting each
// into runs of block payloads.
func produce(ctx context.Context, sources []Source, size int, o WriteOptions, out chan<- piece) {
	slots := make(chan struct{}, o.Multiplex)
	for i := range sources {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		go func() {
			defer func() { <-slots }()
			err := produceOne(ctx, i, sources[i], size, o.RunBlocks, out)
			if err != nil {
				select {
				case out <- piece{stream: i, err: err}:
				case <-ctx.Done():
				}
			}
		}()
	}
}

func produceOne(ctx context.Context, i int, src Source, size, run int, out chan<- piece) error {
	rc, err := src.Open(ctx)
	if err != nil {
		return err
	}
	defer rc.Close()
	br := bufio.NewReaderSize(rc, size)
	for {
		p := piece{stream: i}
		for len(p.payloads) < run && !p.eos {
			buf := make([]byte, size)
			n, err := io.ReadFull(br, buf)
			switch {
			case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
				p.eos = true
			case err != nil:
				return err
			default:
				if _, err := br.Peek(1); errors.Is(err, io.EOF) {
					p.eos = true
				} else if err != nil {
					return err
				}
			}
			if n > 0 || len(p.payloads) == 0 {
				p.payloads = append(p.payloads, buf[:n])
			}
		}
		select {
		case out <- p:
		case <-ctx.Done():
			return ctx.Err()
		}
		if p.eos {
			return nil
		}
	}
}

type sessionWriter struct {
	v     *Volume
	vols  Volumes
	o     WriteOptions
	label format.SessionLabel
	res   *WriteResult
	segs  map[uint32]*format.Segment // this session's, on the current volume
}

// start opens the session's file on the current volume, or on the next
// when this one is in its early-warning zone already (a session before
// ended there): that volume's index then goes as the trailer write,
// marking it full.
func (w *sessionWriter) start(ctx context.Context, continued bool) error {
	for {
		err := w.begin(continued)
		if !errors.Is(err, media.ErrEarlyWarning) {
			return err
		}
		if err := w.nextVolume(ctx); err != nil {
			return err
		}
	}
}

// nextVolume closes the full volume with its index, the one trailer write
// st allows after ENOSPC, and mounts the pool's next. An unexpected end
// of medium leaves no room even for the index: the volume then has no
// index of this session, which the catalogue has from the result, and
// `coffer media catalog --scan` finds.
func (w *sessionWriter) nextVolume(ctx context.Context) error {
	if err := w.end(true); err != nil {
		w.res.NoIndex = append(w.res.NoIndex, w.v.Label.Barcode)
	}
	next, err := w.vols.Next(ctx, w.v)
	if err != nil {
		return fmt.Errorf("volume %s is full: %w", w.v.Label.Barcode, err)
	}
	w.v = next
	return nil
}

// begin prepares the volume for appending and opens the session's file.
func (w *sessionWriter) begin(continued bool) error {
	if err := w.v.prepareAppend(); err != nil {
		return err
	}
	w.segs = map[uint32]*format.Segment{}
	l := w.label
	l.Continued = continued
	return w.v.writeLabelBlock(format.KindSessionStart, &l)
}

// writeData writes one data block, moving to the next volume at the end
// of the medium.
func (w *sessionWriter) writeData(ctx context.Context, h format.Header, payload []byte, info format.StreamInfo) error {
	for {
		block := w.v.buf[:w.v.Label.BlockSize]
		if err := format.EncodeBlock(block, h, payload); err != nil {
			return err
		}
		pos := w.v.pos
		_, err := w.v.Drive.WriteRecord(block)
		if err == nil {
			w.v.pos++
			w.record(h, pos, len(payload), info)
			return nil
		}
		if !errors.Is(err, media.ErrEarlyWarning) && !errors.Is(err, media.ErrEndOfMedium) {
			return fmt.Errorf("volume %s: %w", w.v.Label.Barcode, err)
		}
		// The block was not written: it goes first on the next volume.
		if err := w.nextVolume(ctx); err != nil {
			return err
		}
		if err := w.start(ctx, true); err != nil {
			return err
		}
	}
}

// record adds a written block to its stream's segment on this volume.
func (w *sessionWriter) record(h format.Header, pos int64, n int, info format.StreamInfo) {
	s := w.segs[h.Stream]
	if s == nil {
		s = &format.Segment{StreamInfo: info, Session: h.Session, FirstSeq: h.Seq}
		s.Stream = h.Stream
		w.segs[h.Stream] = s
	}
	if k := len(s.Extents) - 1; k >= 0 && s.Extents[k].Pos+s.Extents[k].Count == pos {
		s.Extents[k].Count++
	} else {
		s.Extents = append(s.Extents, format.Extent{Pos: pos, Count: 1})
	}
	s.LastSeq = h.Seq
	s.Bytes += int64(n)
	s.End = h.Flags&format.FlagEndOfStream != 0
	w.res.Blocks++
	w.res.Bytes += int64(n)
}

// end closes the session's file on this volume and writes the volume's
// index with the session's segments. When the volume is full, the session
// end label is left out: the index must be the single trailer write.
// A volume the session's end reaches the early-warning zone on is full
// too: when the end label is refused, or the index after it, the index
// is written as the trailer, saying the volume is full (nothing could be
// appended to it), and the index closes the session's segments there.
func (w *sessionWriter) end(full bool) error {
	v := w.v
	before := v.Index
	w.res.Volumes = append(w.res.Volumes, w.index(before, full))
	if !full {
		err := v.writeLabelBlock(format.KindSessionEnd, &w.label)
		switch {
		case errors.Is(err, media.ErrEarlyWarning):
			full = true
			w.res.Volumes[len(w.res.Volumes)-1] = w.index(before, true)
		case err != nil:
			return fmt.Errorf("volume %s: session end: %w", v.Label.Barcode, err)
		}
	}
	if err := v.Drive.WriteFilemarks(1, false); err != nil {
		return fmt.Errorf("volume %s: %w", v.Label.Barcode, err)
	}
	v.pos++
	err := v.writeIndex()
	if errors.Is(err, media.ErrEarlyWarning) && !full {
		w.res.Volumes[len(w.res.Volumes)-1] = w.index(before, true)
		err = v.writeIndex()
	}
	return err
}

// index makes the volume's index: the one before the session and the
// session's segments on it (v.Index, which writeIndex writes).
func (w *sessionWriter) index(before format.VolumeIndex, full bool) format.VolumeIndex {
	ix := before
	ix.Segments = slices.Clone(ix.Segments)
	streams := make([]uint32, 0, len(w.segs))
	for s := range w.segs {
		streams = append(streams, s)
	}
	slices.Sort(streams)
	for _, s := range streams {
		ix.Segments = append(ix.Segments, *w.segs[s])
	}
	// Microseconds, as the catalogue keeps times: the copy's result and
	// the volume list then show the same instants.
	now := time.Now().UTC().Truncate(time.Microsecond)
	ix.Written, ix.Full = now, full
	if until := now.Add(w.o.Retention); until.After(ix.ProtectedUntil) {
		ix.ProtectedUntil = until
	}
	w.v.Index = ix
	return ix
}

// prepareAppend positions the drive where the next session goes, closing
// a session cut by a crash: a torn last block is overwritten by the
// filemark that ends the cut file (on WORM it stays, and readers skip it).
func (v *Volume) prepareAppend() error {
	st, err := v.Drive.Status()
	if err != nil {
		return err
	}
	if err := v.Drive.SeekEOD(); err != nil {
		return err
	}
	if v.pos, err = v.Drive.Tell(); err != nil {
		return err
	}
	switch v.Tail {
	case TailTorn:
		if !st.WORM {
			v.pos--
			if err := v.Drive.Locate(v.pos); err != nil {
				return err
			}
		}
		fallthrough
	case TailCut:
		if err := v.Drive.WriteFilemarks(1, true); err != nil {
			return fmt.Errorf("volume %s: close the session cut by a crash: %w", v.Label.Barcode, err)
		}
		v.pos++
	}
	v.Tail = TailClean
	return nil
}
