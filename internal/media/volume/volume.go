// Package volume reads and writes coffer volumes on a media.Drive in the
// on-media format (media/format, docs/design/media-format.md): labelling
// with overwrite protection, mounting with the torn-tail check, sessions
// of multiplexed streams spanning volumes, positioned stream reads, and
// the scan that catalogues a volume from the tape alone.
//
// A volume's tape files:
//
//	file 0      volume label block
//	file 1      volume index (empty)
//	file 2k     session: start label, data blocks of its streams, end label
//	file 2k+1   volume index: every segment on the volume so far
//
// A session cut by a crash has no end label and no index after it: the
// index before it stays the volume's last, and the next append closes the
// cut file (overwriting a torn last block) before it writes.
package volume

import (
	"errors"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/media"
	"github.com/coffer-backup/coffer/internal/media/format"
)

// Errors of mounting and labelling.
var (
	// ErrBlank: the cartridge holds nothing (it needs a label).
	ErrBlank = errors.New("blank volume: label it first")
	// ErrForeign: the cartridge holds data that is not a coffer volume.
	ErrForeign = errors.New("not a coffer volume")
	// ErrProtected: the volume may not be overwritten (unexpired data, or
	// WORM holding data).
	ErrProtected = errors.New("volume is protected against overwriting")
	// ErrUnfinishedLabel: labelling was cut by a crash before the
	// volume's first index was written. The cartridge holds no data, so
	// it is labelled again as a blank one would be.
	ErrUnfinishedLabel = errors.New("labelling was cut by a crash: the volume holds no data")
)

// Volume is a mounted volume: a drive with a labelled cartridge, its last
// index, and where the next session goes.
type Volume struct {
	Drive media.Drive
	Label format.VolumeLabel
	// Index is the volume's last index (segments of complete sessions).
	Index format.VolumeIndex
	// Tail says what the end of the tape looked like at mount.
	Tail Tail
	// IndexAt is the position of the last index's block.
	IndexAt int64
	pos     int64 // next position when writing
	buf     []byte
}

// Tail is the state of a volume's end of data.
type Tail int

const (
	TailClean    Tail = iota // the volume ends with a filemark after an index
	TailCut                  // a session was cut after a whole block
	TailTorn                 // the last block is torn or damaged
	TailCutIndex             // the last file is complete but not an index (a crash before the index)
)

func (t Tail) String() string {
	return [...]string{"clean", "a session cut after a whole block", "a torn last block", "no index after the last session"}[t]
}

// readBlock reads the next record and decodes it.
func (v *Volume) readBlock() (format.Header, []byte, error) {
	return readBlock(v.Drive, v.buf)
}

func readBlock(d media.Drive, buf []byte) (format.Header, []byte, error) {
	n, err := d.ReadRecord(buf)
	if err != nil {
		return format.Header{}, nil, err
	}
	return format.DecodeBlock(buf[:n])
}

// Mount reads a loaded cartridge's label and last index and checks its
// tail, leaving the drive at the end of data.
func Mount(d media.Drive) (*Volume, error) {
	v := &Volume{Drive: d, buf: make([]byte, format.MaxBlockSize)}
	if err := d.Rewind(); err != nil {
		return nil, err
	}
	h, p, err := v.readBlock()
	switch {
	case errors.Is(err, media.ErrEOD):
		return nil, ErrBlank
	case errors.Is(err, format.ErrTorn) && onlyRecord(d):
		return nil, ErrUnfinishedLabel
	case errors.Is(err, format.ErrNotCoffer) || errors.Is(err, media.ErrFilemark):
		return nil, ErrForeign
	case err != nil:
		return nil, fmt.Errorf("volume label: %w", err)
	case h.Kind != format.KindVolumeLabel:
		return nil, fmt.Errorf("%w: the first block is a %s", ErrForeign, h.Kind)
	}
	l, err := format.DecodeVolumeLabel(p)
	if err != nil {
		return nil, err
	}
	v.Label = *l
	if err := v.checkTail(); err != nil {
		return nil, err
	}
	if err := v.findIndex(); err != nil {
		return nil, err
	}
	return v, d.SeekEOD()
}

// onlyRecord reports whether the tape ends after its first record: a
// label torn there is one whose writing was cut, not one damaged since.
func onlyRecord(d media.Drive) bool {
	if err := d.SeekEOD(); err != nil {
		return false
	}
	end, err := d.Tell()
	return err == nil && end == 1
}

// checkTail looks at the last object before the end of data.
func (v *Volume) checkTail() error {
	d := v.Drive
	if err := d.SeekEOD(); err != nil {
		return err
	}
	end, err := d.Tell()
	if err != nil {
		return err
	}
	v.pos = end
	err = d.SpaceRecords(-1)
	if errors.Is(err, media.ErrFilemark) {
		v.Tail = TailClean
		return nil
	}
	if err != nil {
		return fmt.Errorf("check the end of the volume: %w", err)
	}
	_, _, err = v.readBlock()
	switch {
	case err == nil:
		v.Tail = TailCut
	case errors.Is(err, format.ErrTorn), errors.Is(err, format.ErrChecksum), errors.Is(err, format.ErrNotCoffer), errors.Is(err, media.ErrMedium):
		v.Tail = TailTorn
	default:
		return fmt.Errorf("check the end of the volume: %w", err)
	}
	return nil
}

// findIndex walks the tape files back from the end of data to the last
// index. A clean tail whose last file is no index (a crash between a
// session's end and its index) is marked TailCutIndex.
func (v *Volume) findIndex() error {
	d := v.Drive
	cur := v.pos // the start of a file, or the end of data
	first := true
	complete := 0 // files passed that are more than a torn last block
	for {
		if err := d.Locate(cur); err != nil {
			return err
		}
		// Back to the start of the file before cur: over the filemark
		// that ends it (unless the file at the end is cut, with no
		// filemark), then over the one before it.
		marks := -2
		if first && v.Tail != TailClean {
			marks = -1
		}
		err := d.SpaceFilemarks(marks)
		start := int64(0)
		switch {
		case errors.Is(err, media.ErrBOT):
		case err != nil:
			return fmt.Errorf("find the volume index: %w", err)
		default:
			if err := d.SpaceFilemarks(1); err != nil {
				return fmt.Errorf("find the volume index: %w", err)
			}
			if start, err = d.Tell(); err != nil {
				return err
			}
		}
		if first && v.Tail == TailTorn && start == v.pos-1 {
			// The last file is a torn block alone: a write cut as it
			// began a file, the index's or a session's. The append
			// overwrites it; the index is further back.
			first, cur = false, start
			continue
		}
		h, p, err := v.readBlock()
		if err != nil {
			return fmt.Errorf("find the volume index: the file at %d: %w", start, err)
		}
		switch h.Kind {
		case format.KindIndex:
			ix, err := format.DecodeVolumeIndex(p)
			if err != nil {
				return err
			}
			if ix.Label != v.Label {
				return fmt.Errorf("the volume index names volume %s/%s, the label %s/%s", ix.Label.Barcode, ix.Label.MediaSet, v.Label.Barcode, v.Label.MediaSet)
			}
			v.Index, v.IndexAt = *ix, start
			if first && v.Tail == TailClean {
				return nil
			}
			if v.Tail == TailClean {
				v.Tail = TailCutIndex
			}
			return nil
		case format.KindVolumeLabel:
			if complete == 0 {
				// Labelling writes the first index before any session,
				// so only its own crash leaves a label with nothing
				// after it.
				return fmt.Errorf("%w: %s", ErrUnfinishedLabel, v.Label.Barcode)
			}
			return fmt.Errorf("volume %s has no index: run coffer media catalog --scan", v.Label.Barcode)
		}
		if first && v.Tail == TailClean {
			v.Tail = TailCutIndex
		}
		first = false
		complete++
		cur = start
	}
}

// Protected reports whether overwriting the volume is refused at now, and
// why.
func (v *Volume) Protected(now time.Time, worm bool) error {
	if len(v.Index.Segments) == 0 {
		return nil
	}
	if worm {
		return fmt.Errorf("%w: %s is a WORM cartridge holding data", ErrProtected, v.Label.Barcode)
	}
	if now.Before(v.Index.ProtectedUntil) {
		return fmt.Errorf("%w: %s holds data kept until %s", ErrProtected, v.Label.Barcode, v.Index.ProtectedUntil.Format(time.RFC3339))
	}
	return nil
}
