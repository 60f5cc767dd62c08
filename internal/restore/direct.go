package restore

import (
	"context"
	"errors"
	"os"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
)

// preallocate reserves the file blocks of every span holding data (and not
// in skip), in runs of consecutive spans. Why: writes into a hole allocate
// blocks under the inode lock, so parallel O_DIRECT writers take turns;
// writes into reserved (unwritten, reading as zeros) blocks proceed side by
// side, which measured 1.7x faster here. It also makes a full disk fail at
// the start of a restore instead of part way through. Filesystems without
// fallocate just skip it.
func preallocate(ctx context.Context, f *os.File, m *repo.DiskMap, skip func(uint64) bool) error {
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
		if x.IsZero() || x == repo.LostChunk || skip(i) {
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
