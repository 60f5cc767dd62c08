package directio

import (
	"errors"
	"os"
	"sync/atomic"
	"syscall"
)

// Writer writes a file past the page cache where it can. Aligned writes
// go through a second descriptor opened with O_DIRECT; unaligned ones (a
// file's last partial block) go through the ordinary descriptor, and so
// does everything on a filesystem without O_DIRECT (tmpfs). Both name the
// same inode, so one fsync of the ordinary descriptor covers both. Safe
// for concurrent WriteAt.
type Writer struct {
	buffered *os.File
	opened   *os.File                // the O_DIRECT descriptor, closed by Close
	direct   atomic.Pointer[os.File] // opened, or nil once given up
}

// NewWriter opens an O_DIRECT descriptor beside f (by f's name).
func NewWriter(f *os.File) *Writer {
	w := &Writer{buffered: f}
	if d, err := os.OpenFile(f.Name(), os.O_WRONLY|syscall.O_DIRECT, 0); err == nil {
		w.opened = d
		w.direct.Store(d)
	}
	return w
}

// Direct reports whether writes may still go past the page cache.
func (w *Writer) Direct() bool { return w.direct.Load() != nil }

// WriteAt writes p at off, directly when p, off and len(p) are aligned.
func (w *Writer) WriteAt(p []byte, off int64) (int, error) {
	if d := w.direct.Load(); d != nil && Aligned(p, off) {
		n, err := d.WriteAt(p, off)
		if !errors.Is(err, syscall.EINVAL) {
			return n, err
		}
		// Some filesystems accept O_DIRECT at open and refuse the write.
		w.direct.CompareAndSwap(d, nil)
	}
	return w.buffered.WriteAt(p, off)
}

// Close closes the O_DIRECT descriptor; the ordinary one stays the
// caller's.
func (w *Writer) Close() {
	if w.opened != nil {
		_ = w.opened.Close()
		w.opened = nil
	}
	w.direct.Store(nil)
}
