package restore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/directio"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/store"
)

// Progress counts restore work; readers poll it.
type Progress struct {
	BytesTotal   atomic.Int64
	BytesDone    atomic.Int64
	BytesWritten atomic.Int64
}

// FileOptions tune ToFile.
type FileOptions struct {
	Workers  int
	Progress *Progress
	// Resume continues an interrupted restore of the same disk into the
	// same path instead of starting over.
	Resume bool
	// Overwrite allows replacing an existing regular file.
	Overwrite bool
	// NoOffload writes zero bytes as zeros even where the target could
	// make them without (holes, a device's zeroing): for storage whose
	// offload misbehaves, and to measure what the offload saves.
	NoOffload bool
}

// Stats describe a finished restore.
type Stats struct {
	BytesWritten int64
	BytesZero    int64
	// Zeroing is how the zero bytes were made zero, the block-zero
	// primitive: ZeroOffloaded without sending them (holes of a sparse
	// file, or the device's own zeroing: fallocate ZERO_RANGE, which the
	// kernel maps to BLKZEROOUT, WRITE SAME or UNMAP), ZeroWritten by
	// writing zeros (a device without zeroing offload, the fallback).
	ZeroOffloaded, ZeroWritten int64
	Chunks                     int
	Requests                   int
	Resumed                    bool
	// Lost are the byte ranges a repair recorded as lost: written as
	// zeros, and to be reported (the restore is incomplete).
	Lost []hypervisor.Extent
}

// ErrTargetExists refuses to overwrite without permission.
var ErrTargetExists = errors.New("restore target exists")

// ErrTargetNotFile refuses a target that is neither a regular file nor a
// block device (a directory, a socket, ...): renaming the restored image
// over it would fail only after the whole disk was written.
var ErrTargetNotFile = errors.New("restore target is not a regular file or block device")

// CheckTarget tells whether a disk image may be written to path as a new
// file: nothing there yet, or a regular file and overwrite set. Block
// devices are the caller's to handle.
func CheckTarget(path string, overwrite bool) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%w: %s is a %s: name a file in it instead", ErrTargetNotFile, path, describeMode(fi.Mode()))
	case !overwrite:
		return fmt.Errorf("%w: %s (use --overwrite to replace it)", ErrTargetExists, path)
	}
	return nil
}

func describeMode(m fs.FileMode) string {
	if m.IsDir() {
		return "directory"
	}
	return "special file (" + m.Type().String() + ")"
}

// ErrTargetFull means the file system restored onto has no room for the
// disk's data (the repository is not involved). It is a store.ErrNoSpace,
// so it maps to the same exit code.
var ErrTargetFull error = targetFull{}

type targetFull struct{}

func (targetFull) Error() string { return "not enough space on the restore target" }
func (targetFull) Unwrap() error { return store.ErrNoSpace }

// afterBatch, when set by a test, runs after every written batch (to
// interrupt a restore at a known point).
var afterBatch func()

// checkpointEvery is how much data is written between resume checkpoints.
const checkpointEvery = 256 << 20

// ToFile restores one disk of a snapshot into a sparse regular file or onto
// a block device. A regular file is written as <path>.coffer-partial and
// renamed when complete, so path never holds a half-restored image; the
// partial file and its checkpoint let an interrupted restore resume.
func ToFile(ctx context.Context, r *repo.Repository, snap *repo.Point, d repo.Disk, path string, o FileOptions) (Stats, error) {
	var st Stats
	m, err := r.OpenDiskMap(ctx, d.Map)
	if err != nil {
		return st, err
	}
	t, err := openTarget(path, m.DiskSize(), o)
	if err != nil {
		return st, err
	}
	defer t.close()
	ck := newCheckpoint(t.statePath, snap.ID.String(), d.Key, m.Count())
	if o.Resume && t.partial {
		st.Resumed = ck.load()
	}
	if o.Progress != nil {
		o.Progress.BytesTotal.Add(m.DiskSize())
	}
	if !t.device {
		if err := preallocate(ctx, t.f, m, ck.isDone); err != nil {
			if !st.Resumed {
				// Nothing written yet: do not leave a file holding the
				// space that was reserved before the failure.
				t.discard()
			}
			return st, fmt.Errorf("%s: %w", path, err)
		}
	}
	// A device keeps old contents: its zero spans must be zeroed. A
	// file's are holes, unless the offload is off: then zeros are
	// written, as a tool without it would.
	if t.device || o.NoOffload {
		if st.ZeroOffloaded, st.ZeroWritten, err = zeroSpans(ctx, t.f, m, !o.NoOffload); err != nil {
			return st, fmt.Errorf("%s: %w", path, translateWriteErr(err))
		}
	}
	for from := uint64(0); from < m.Count(); from += planWindow {
		end := min(from+planWindow, m.Count())
		groups, zero, err := plan(ctx, r, m, ck.isDone, func(i uint64) { st.Lost = addSpan(st.Lost, m, i) }, from, end)
		if err != nil {
			return st, err
		}
		st.BytesZero += zero
		if !t.device && !o.NoOffload {
			st.ZeroOffloaded += zero // holes: never written
		}
		if o.Progress != nil {
			o.Progress.BytesDone.Add(rangeBytes(m, from, end) - plannedBytes(groups, m))
		}
		if err := writeGroups(ctx, r, m, t.f, groups, ck, o, &st); err != nil {
			if serr := ck.save(t.f); serr != nil {
				r.Logger().Warn("could not save restore checkpoint", "err", serr)
			}
			return st, err
		}
	}
	if err := t.f.Sync(); err != nil {
		return st, fmt.Errorf("fsync %s: %w", t.path, err)
	}
	return st, t.finish(path)
}

func plannedBytes(groups []readGroup, m *repo.DiskMap) int64 {
	var n int64
	for _, g := range groups {
		for _, ref := range g.refs {
			for _, s := range ref.spans {
				n += int64(m.SpanLength(s))
			}
		}
	}
	return n
}

func writeGroups(ctx context.Context, r *repo.Repository, m *repo.DiskMap, f *os.File, groups []readGroup, ck *checkpoint, o FileOptions, st *Stats) error {
	var (
		written atomic.Int64
		chunks  atomic.Int64
		sinceCk atomic.Int64
		ckMu    sync.Mutex
	)
	cs := int64(m.ChunkSize())
	// Past the page cache: a restore writes data nobody reads back soon.
	// The disk writes then overlap decryption and decompression on the
	// other workers, the kernel's copy disappears, and a large restore
	// does not evict the host's cached production data.
	w := directio.NewWriter(f)
	defer w.Close()
	write := func(p []byte, off int64) error {
		if _, err := w.WriteAt(p, off); err != nil {
			return fmt.Errorf("write at %d: %w", off, translateWriteErr(err))
		}
		written.Add(int64(len(p)))
		if o.Progress != nil {
			o.Progress.BytesDone.Add(int64(len(p)))
			o.Progress.BytesWritten.Add(int64(len(p)))
		}
		return nil
	}
	err := fetch(ctx, r, groups, o.Workers, func(batch []*chunkRef, plain []byte) error {
		if len(batch) == 1 {
			// A single chunk may fill several spans (duplicates).
			for _, s := range batch[0].spans {
				if err := write(plain, int64(s)*cs); err != nil {
					return err
				}
			}
		} else if err := write(plain, int64(batch[0].spans[0])*cs); err != nil {
			return err
		}
		for _, ref := range batch {
			for _, s := range ref.spans {
				ck.markDone(s)
			}
		}
		chunks.Add(int64(len(batch)))
		if afterBatch != nil {
			afterBatch()
		}
		if sinceCk.Add(int64(len(plain))) > checkpointEvery && ckMu.TryLock() {
			sinceCk.Store(0)
			if err := ck.save(f); err != nil {
				r.Logger().Warn("could not save restore checkpoint", "err", err)
			}
			ckMu.Unlock()
		}
		return nil
	})
	st.BytesWritten += written.Load()
	st.Chunks += int(chunks.Load())
	st.Requests += len(groups)
	return err
}

func translateWriteErr(err error) error {
	if errors.Is(err, unix.ENOSPC) {
		return fmt.Errorf("%w: %w", ErrTargetFull, err)
	}
	return err
}

// target is the file or device being written.
type target struct {
	f         *os.File
	path      string // the file written (partial name for regular files)
	statePath string
	device    bool
	partial   bool // a previous partial file existed
}

func openTarget(path string, size int64, o FileOptions) (*target, error) {
	fi, err := os.Stat(path)
	if err == nil && fi.Mode()&fs.ModeDevice != 0 {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
		devSize, err := f.Seek(0, 2)
		if err == nil && devSize < size {
			err = fmt.Errorf("device %s has %d bytes, the disk needs %d", path, devSize, size)
		}
		if err != nil {
			_ = f.Close() // nothing written yet
			return nil, err
		}
		return &target{f: f, path: path, statePath: "", device: true}, nil
	}
	if err := CheckTarget(path, o.Overwrite); err != nil {
		return nil, err
	}
	t := &target{path: path + ".coffer-partial", statePath: path + ".coffer-partial.state"}
	flags := os.O_WRONLY | os.O_CREATE
	if _, err := os.Stat(t.path); err == nil && o.Resume {
		t.partial = true
	} else {
		flags |= os.O_TRUNC
	}
	if t.f, err = os.OpenFile(t.path, flags, 0o600); err != nil {
		return nil, err
	}
	// Truncating to the disk size makes every unwritten span a hole.
	if err := t.f.Truncate(size); err != nil {
		_ = t.f.Close() // the truncate's error is returned
		return nil, translateWriteErr(err)
	}
	return t, nil
}

func (t *target) close() { _ = t.f.Close() }

// discard removes a partial file and its checkpoint.
func (t *target) discard() {
	_ = os.Remove(t.path)
	_ = os.Remove(t.statePath)
}

func (t *target) finish(final string) error {
	if t.device {
		return nil
	}
	if err := os.Rename(t.path, final); err != nil {
		return err
	}
	_ = os.Remove(t.statePath)
	return nil
}

// zeroSpans clears the hole spans of a disk on a block device (or, with
// NoOffload, in a file), using the target's zeroing offload when allowed
// and offered (fallocate ZERO_RANGE maps to BLKZEROOUT / WRITE SAME /
// UNMAP on a device) and plain writes otherwise, and says how many bytes
// went each way.
func zeroSpans(ctx context.Context, f *os.File, m *repo.DiskMap, offload bool) (offloaded, written int64, err error) {
	var zeroBuf []byte
	cs := int64(m.ChunkSize())
	err = m.Iterate(ctx, func(i uint64, x id.ID) error {
		if !x.IsZero() && x != repo.LostChunk {
			return nil
		}
		off, n := int64(i)*cs, int64(m.SpanLength(i))
		if offload {
			if err := unix.Fallocate(int(f.Fd()), unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, off, n); err == nil {
				offloaded += n
				return nil
			}
		}
		if zeroBuf == nil {
			zeroBuf = make([]byte, cs)
		}
		if _, err := f.WriteAt(zeroBuf[:n], off); err != nil {
			return err
		}
		written += n
		return nil
	})
	return offloaded, written, err
}
