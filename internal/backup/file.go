package backup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// FileSource is a raw disk image or a block device.
type FileSource struct {
	*os.File
	path   string
	size   int64
	device bool
	ino    uint64
}

// OpenFile opens a raw image or block device for reading.
func OpenFile(path string) (*FileSource, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		_ = f.Close() // read only
		return nil, err
	}
	s := &FileSource{File: f, path: path, size: fi.Size()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.ino = st.Ino
	}
	switch {
	case fi.Mode()&fs.ModeDevice != 0:
		s.device = true
		if s.size, err = f.Seek(0, 2); err != nil {
			_ = f.Close() // read only
			return nil, err
		}
	case !fi.Mode().IsRegular():
		_ = f.Close() // read only
		return nil, fmt.Errorf("%s is neither a regular file nor a block device", path)
	}
	return s, nil
}

// Size is the image's size.
func (s *FileSource) Size() int64 { return s.size }

// Allocated maps a sparse file's data ranges with SEEK_DATA/SEEK_HOLE, so
// holes are never read. Block devices report nil (everything).
func (s *FileSource) Allocated() ([]hypervisor.Extent, error) {
	if s.device {
		return nil, nil
	}
	fd := int(s.Fd())
	var out []hypervisor.Extent
	for off := int64(0); off < s.size; {
		data, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // no data after off
		}
		if err != nil {
			return nil, nil // filesystem without SEEK_DATA: read everything
		}
		hole, err := unix.Seek(fd, data, unix.SEEK_HOLE)
		if err != nil {
			return nil, nil
		}
		hole = min(hole, s.size)
		if hole > data {
			out = append(out, hypervisor.Extent{Offset: data, Length: hole - data})
		}
		off = hole
	}
	if out == nil {
		out = []hypervisor.Extent{}
	}
	return out, nil
}

// CheckUnchanged fails when the image vanished, was replaced or resized
// during the backup.
func (s *FileSource) CheckUnchanged() error {
	fi, err := os.Stat(s.path)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrSourceChanged, s.path, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Ino != s.ino {
		return fmt.Errorf("%w: %s was replaced by another file", ErrSourceChanged, s.path)
	}
	if !s.device && fi.Size() != s.size {
		return fmt.Errorf("%w: %s changed size from %d to %d bytes", ErrSourceChanged, s.path, s.size, fi.Size())
	}
	return nil
}
