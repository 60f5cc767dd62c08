package volume

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/media"
	"github.com/coffer-backup/coffer/internal/media/format"
)

// LabelOptions say how a cartridge is labelled.
type LabelOptions struct {
	Barcode, Pool string
	// MediaSet joins an existing set; "" starts a new one.
	MediaSet  string
	BlockSize int // default format.DefaultBlockSize
	// Foreign allows overwriting a cartridge holding data that is not a
	// coffer volume. Protection of coffer volumes is never overridden.
	Foreign bool
	Now     time.Time
}

// NewMediaSetID returns a random media set ID.
func NewMediaSetID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Label writes a volume label and an empty index at the beginning of the
// loaded cartridge, erasing what it held. It refuses a coffer volume whose
// data is unexpired, a WORM cartridge holding anything, and (without
// Foreign) a cartridge holding other data.
func Label(d media.Drive, o LabelOptions) (*Volume, error) {
	if o.Now.IsZero() {
		o.Now = time.Now()
	}
	if o.BlockSize == 0 {
		o.BlockSize = format.DefaultBlockSize
	}
	if o.MediaSet == "" {
		o.MediaSet = NewMediaSetID()
	}
	l := format.VolumeLabel{Format: format.Version, Barcode: o.Barcode, Pool: o.Pool, MediaSet: o.MediaSet,
		Labelled: o.Now.UTC().Truncate(time.Second), BlockSize: o.BlockSize}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	st, err := d.Status()
	if err != nil {
		return nil, err
	}
	if !st.Loaded {
		return nil, media.ErrNoMedium
	}
	old, err := Mount(d)
	switch {
	case errors.Is(err, ErrBlank):
	case errors.Is(err, ErrUnfinishedLabel) && !st.WORM:
	case errors.Is(err, ErrForeign) && o.Foreign && !st.WORM:
	case errors.Is(err, ErrForeign):
		return nil, fmt.Errorf("%w: %s holds data that is not a coffer volume (WORM: %v)", ErrProtected, o.Barcode, st.WORM)
	case err != nil:
		return nil, fmt.Errorf("%w: %s: %v", ErrProtected, o.Barcode, err)
	default:
		if err := old.Protected(o.Now, st.WORM); err != nil {
			return nil, err
		}
		if st.WORM {
			return nil, fmt.Errorf("%w: %s is a WORM cartridge already labelled", ErrProtected, o.Barcode)
		}
	}
	if err := d.Rewind(); err != nil {
		return nil, err
	}
	v := &Volume{Drive: d, Label: l, buf: make([]byte, format.MaxBlockSize)}
	v.Index = format.VolumeIndex{Label: l, Written: l.Labelled, Segments: []format.Segment{}}
	if err := v.writeLabelBlock(format.KindVolumeLabel, &l); err != nil {
		return nil, err
	}
	if err := d.WriteFilemarks(1, false); err != nil {
		return nil, err
	}
	v.pos++
	if err := v.writeIndex(); err != nil {
		return nil, err
	}
	return v, nil
}

// writeLabelBlock writes a label as one block at the current position.
func (v *Volume) writeLabelBlock(kind format.Kind, label any) error {
	p, err := format.EncodeLabel(label, v.Label.BlockSize)
	if err != nil {
		return err
	}
	block := v.buf[:v.Label.BlockSize]
	if err := format.EncodeBlock(block, format.Header{Kind: kind}, p); err != nil {
		return err
	}
	if _, err := v.Drive.WriteRecord(block); err != nil {
		return err
	}
	v.pos++
	return nil
}

// writeIndex writes the index file (its block and a filemark, flushed).
// After an early warning this is the one trailer write st allows.
func (v *Volume) writeIndex() error {
	at := v.pos
	if err := v.writeLabelBlock(format.KindIndex, &v.Index); err != nil {
		return fmt.Errorf("write the volume index: %w", err)
	}
	if err := v.Drive.WriteFilemarks(1, true); err != nil {
		return fmt.Errorf("write the volume index: %w", err)
	}
	v.pos++
	v.IndexAt = at
	return nil
}
