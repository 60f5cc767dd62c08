package format

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"time"

	"github.com/klauspost/compress/zstd"
)

// VolumeLabel is the first block of every volume: which cartridge it is
// and which pool and media set it belongs to.
type VolumeLabel struct {
	Format    int       `json:"format"`
	Barcode   string    `json:"barcode"`
	Pool      string    `json:"pool"`
	MediaSet  string    `json:"media_set"` // the set's random ID, shared by its volumes
	Labelled  time.Time `json:"labelled"`
	BlockSize int       `json:"block_size"`
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Validate checks a label read from a medium or about to be written.
func (l *VolumeLabel) Validate() error {
	switch {
	case l.Format != Version:
		return fmt.Errorf("volume label format %d: this coffer reads %d", l.Format, Version)
	case !nameRE.MatchString(l.Barcode):
		return fmt.Errorf("volume label: barcode %q", l.Barcode)
	case !nameRE.MatchString(l.Pool):
		return fmt.Errorf("volume label: pool %q", l.Pool)
	case !nameRE.MatchString(l.MediaSet):
		return fmt.Errorf("volume label: media set %q", l.MediaSet)
	}
	return ValidBlockSize(l.BlockSize)
}

// StreamInfo says what a stream of a session carries: one backup point.
type StreamInfo struct {
	Stream     uint32    `json:"stream"`
	Point      string    `json:"point"`
	VM         string    `json:"vm,omitempty"`
	Repository string    `json:"repository"` // the source repository's ID
	Time       time.Time `json:"time"`       // the point's time
}

// SessionLabel opens (KindSessionStart) and closes (KindSessionEnd) a
// session's tape file. A session continued on the next volume opens it
// again with Continued set.
type SessionLabel struct {
	Session   SessionID    `json:"session"`
	Time      time.Time    `json:"time"`
	Host      string       `json:"host,omitempty"`
	Continued bool         `json:"continued,omitempty"`
	Streams   []StreamInfo `json:"streams"`
}

// Extent is a run of consecutive blocks of one stream on a volume: the
// position of the first and how many.
type Extent struct {
	Pos   int64 `json:"pos"`
	Count int64 `json:"count"`
}

// Segment is the part of one stream on one volume: where its blocks are,
// which of the stream's blocks they are, and whether the stream starts or
// ends here. It is a row of the media catalogue.
type Segment struct {
	StreamInfo
	Session  SessionID `json:"session"`
	Extents  []Extent  `json:"extents"`
	FirstSeq uint64    `json:"first_seq"`
	LastSeq  uint64    `json:"last_seq"`
	Bytes    int64     `json:"bytes"` // payload bytes here
	End      bool      `json:"end"`   // the stream's last block is here
}

// First and Last are the positions of the segment's first and last block.
func (s *Segment) First() int64 { return s.Extents[0].Pos }
func (s *Segment) Last() int64 {
	e := s.Extents[len(s.Extents)-1]
	return e.Pos + e.Count - 1
}

// Blocks is how many blocks the segment has.
func (s *Segment) Blocks() int64 {
	var n int64
	for _, e := range s.Extents {
		n += e.Count
	}
	return n
}

// Validate checks that a segment read from a medium is coherent.
func (s *Segment) Validate() error {
	if len(s.Extents) == 0 {
		return fmt.Errorf("segment of point %s has no blocks", s.Point)
	}
	prev := int64(0)
	for _, e := range s.Extents {
		if e.Pos < 1 || e.Count < 1 || e.Pos < prev {
			return fmt.Errorf("segment of point %s: extent %+v out of order", s.Point, e)
		}
		prev = e.Pos + e.Count
	}
	if s.LastSeq < s.FirstSeq || s.LastSeq-s.FirstSeq+1 != uint64(s.Blocks()) {
		return fmt.Errorf("segment of point %s: %d blocks for sequence %d..%d", s.Point, s.Blocks(), s.FirstSeq, s.LastSeq)
	}
	return nil
}

// VolumeIndex is written at the end of a volume after each session: the
// volume's label, every segment on it so far, and whether the volume is
// full. The last index on a volume catalogues it without any database.
type VolumeIndex struct {
	Label   VolumeLabel `json:"label"`
	Written time.Time   `json:"written"`
	Full    bool        `json:"full"`
	// ProtectedUntil: the volume may not be overwritten before this time
	// (the latest session's time plus its pool's retention).
	ProtectedUntil time.Time `json:"protected_until"`
	Segments       []Segment `json:"segments"`
}

// maxLabelJSON bounds what a decoder inflates: a label or index never
// exceeds one block, and a block is at most MaxBlockSize.
const maxLabelJSON = 64 << 20

var (
	zenc, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault))
	zdec, _ = zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxLabelJSON))
)

// EncodeLabel turns a label (a VolumeLabel, SessionLabel or VolumeIndex)
// into a block payload: zstd-compressed JSON. It fails when the result
// does not fit one block of blockSize.
func EncodeLabel(v any, blockSize int) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := zenc.EncodeAll(raw, nil)
	if len(out) > Payload(blockSize) {
		return nil, fmt.Errorf("label of %d bytes (compressed) does not fit a %d-byte block", len(out), blockSize)
	}
	return out, nil
}

// DecodeLabel reads a label payload into v, refusing unknown fields so a
// damaged or foreign label is never half read.
func DecodeLabel(payload []byte, v any) error {
	raw, err := zdec.DecodeAll(payload, nil)
	if err != nil {
		return fmt.Errorf("label: %w", err)
	}
	if len(raw) > maxLabelJSON {
		return fmt.Errorf("label: %d bytes inflated", len(raw))
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return fmt.Errorf("label: %w", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return fmt.Errorf("label: trailing data")
	}
	return nil
}

// DecodeVolumeLabel reads and validates a volume label payload.
func DecodeVolumeLabel(payload []byte) (*VolumeLabel, error) {
	var l VolumeLabel
	if err := DecodeLabel(payload, &l); err != nil {
		return nil, err
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	return &l, nil
}

// DecodeSessionLabel reads a session label payload.
func DecodeSessionLabel(payload []byte) (*SessionLabel, error) {
	var l SessionLabel
	if err := DecodeLabel(payload, &l); err != nil {
		return nil, err
	}
	seen := map[uint32]bool{}
	for _, s := range l.Streams {
		if seen[s.Stream] || s.Point == "" {
			return nil, fmt.Errorf("session label: stream %d listed twice or without a point", s.Stream)
		}
		seen[s.Stream] = true
	}
	return &l, nil
}

// DecodeVolumeIndex reads and validates a volume index payload.
func DecodeVolumeIndex(payload []byte) (*VolumeIndex, error) {
	var ix VolumeIndex
	if err := DecodeLabel(payload, &ix); err != nil {
		return nil, err
	}
	if err := ix.Label.Validate(); err != nil {
		return nil, err
	}
	for i := range ix.Segments {
		if err := ix.Segments[i].Validate(); err != nil {
			return nil, fmt.Errorf("volume index: %w", err)
		}
	}
	return &ix, nil
}
