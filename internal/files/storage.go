package files

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/diskfs/go-diskfs/backend"
)

// readerStorage adapts an io.ReaderAt to go-diskfs' backend.Storage,
// read-only. go-diskfs only offers file-backed storage; coffer's images
// are repository readers.
type readerStorage struct {
	r    io.ReaderAt
	size int64
	pos  int64
}

var _ backend.Storage = (*readerStorage)(nil)

func (s *readerStorage) ReadAt(p []byte, off int64) (int, error) {
	if off >= s.size {
		return 0, io.EOF
	}
	if max := s.size - off; int64(len(p)) > max {
		n, err := s.r.ReadAt(p[:max], off)
		if err == nil {
			err = io.EOF
		}
		return n, err
	}
	return s.r.ReadAt(p, off)
}

func (s *readerStorage) Read(p []byte) (int, error) {
	n, err := s.ReadAt(p, s.pos)
	s.pos += int64(n)
	return n, err
}

func (s *readerStorage) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		s.pos = off
	case io.SeekCurrent:
		s.pos += off
	case io.SeekEnd:
		s.pos = s.size + off
	}
	if s.pos < 0 {
		return 0, errors.New("negative position")
	}
	return s.pos, nil
}

func (s *readerStorage) Stat() (fs.FileInfo, error) { return storageInfo{s.size}, nil }
func (s *readerStorage) Close() error               { return nil }
func (s *readerStorage) Sys() (*os.File, error)     { return nil, errors.New("not a file") }
func (s *readerStorage) Path() string               { return "" }
func (s *readerStorage) Writable() (backend.WritableFile, error) {
	return nil, backend.ErrIncorrectOpenMode
}

type storageInfo struct{ size int64 }

func (i storageInfo) Name() string       { return "image" }
func (i storageInfo) Size() int64        { return i.size }
func (i storageInfo) Mode() fs.FileMode  { return 0o400 }
func (i storageInfo) ModTime() time.Time { return time.Time{} }
func (i storageInfo) IsDir() bool        { return false }
func (i storageInfo) Sys() any           { return nil }
