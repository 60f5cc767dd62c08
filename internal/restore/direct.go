package restore

import (
	"context"
	"errors"
	"os"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/directio"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo/diskmap"
)

// directWriter writes restored chunks past the page cache when it can.
//
// Why: a restore writes data nobody reads back soon. Through the page cache
// every byte is copied once more by the kernel, and all of it reaches the
// disk only at the final fsync, after the CPU work is done; with O_DIRECT
// the disk writes overlap decryption and decompression on the other
// workers, the kernel copy disappears, and a large restore does not evict
// the host's cached production data. Writes that are not aligned (a disk's
// last partial chunk) and filesystems without O_DIRECT (tmpfs) use the
// ordinary descriptor; both name the same inode, so one fsync covers both.
type directWriter struct {
	buffered *os.File
	opened   *os.File                // the O_DIRECT descriptor, closed at the end
	direct   atomic.Pointer[os.File] // opened, or nil once given up
}

func newDirectWriter(f *os.File, path string) *directWriter {
	w := &directWriter{buffered: f}
	if d, err := os.OpenFile(path, os.O_WRONLY|syscall.O_DIRECT, 0); err == nil {
		w.opened = d
		w.direct.Store(d)
	}
	return w
}

// WriteAt writes p at off, directly when p, off and len(p) are aligned.
func (w *directWriter) WriteAt(p []byte, off int64) (int, error) {
	if d := w.direct.Load(); d != nil && directio.Aligned(p, off) {
		n, err := d.WriteAt(p, off)
		if !errors.Is(err, syscall.EINVAL) {
			return n, err
		}
		// Some filesystems accept O_DIRECT at open and refuse the write.
		w.direct.CompareAndSwap(d, nil)
	}
	return w.buffered.WriteAt(p, off)
}

func (w *directWriter) close() {
	if w.opened != nil {
		_ = w.opened.Close()
	}
}

// preallocate reserves the file blocks of every span holding data (and not
// in skip), in runs of consecutive spans. Why: writes into a hole allocate
// blocks under the inode lock, so parallel O_DIRECT writers take turns;
// writes into reserved (unwritten, reading as zeros) blocks proceed side by
// side, which measured 1.7x faster here. It also makes a full disk fail at
// the start of a restore instead of part way through. Filesystems without
// fallocate just skip it.
func preallocate(ctx context.Context, f *os.File, m *diskmap.Map, skip func(uint64) bool) error {
	cs := int64(m.ChunkSize())
	var start, end int64 // the current run
	reserve := func() error {
		if end == start {
			return nil
		}
		err := unix.Fallocate(int(f.Fd()), 0, start, end-start)
		if errors.Is(err, unix.EOPNOTSUPP) {
			return errUnsupported
		}
		return translateWriteErr(err)
	}
	err := m.Iterate(ctx, func(i uint64, x id.ID) error {
		if x.IsZero() || skip(i) {
			return nil
		}
		off := int64(i) * cs
		if off != end {
			if err := reserve(); err != nil {
				return err
			}
			start = off
		}
		end = off + int64(m.SpanLength(i))
		return nil
	})
	if err == nil {
		err = reserve()
	}
	if errors.Is(err, errUnsupported) {
		return nil
	}
	return err
}

var errUnsupported = errors.New("fallocate not supported")
