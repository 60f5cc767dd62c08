// Package offload holds the full-copy primitive (VAAI's XCOPY): a file is
// cloned by the storage when it can, and copied by the host when it
// cannot, and the caller learns which path was taken so the operator sees
// what passed through the host.
//
// Hand-written: the Go standard library's io.Copy between two *os.File
// uses copy_file_range, but it neither tries a clone first nor keeps a
// sparse file's holes, nor says which path it took.
package offload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/statefile"
)

// Method is the path a copy took.
type Method string

const (
	// Cloned: the filesystem shares the source's extents with the copy
	// (FICLONE on XFS with reflink=1, btrfs): no data passed through
	// the host, and the copy takes no space until one side is written.
	Cloned Method = "cloned"
	// KernelCopied: the kernel copied the data extents (copy_file_range),
	// without lifting them into coffer's memory; NFS and other servers
	// that copy on their side do it here.
	KernelCopied Method = "kernel-copied"
	// Copied: the data extents were read and written by coffer.
	Copied Method = "copied"
)

// Offloaded reports whether the storage made the copy without moving its
// data through the host.
func (m Method) Offloaded() bool { return m == Cloned }

// CopyStats says how a copy was made.
type CopyStats struct {
	Method Method
	// DataBytes is the size of the source's data extents (its holes are
	// holes in the copy too, and are not counted).
	DataBytes int64
}

// CopyOptions tune CopyFile.
type CopyOptions struct {
	// Overwrite replaces a target that exists.
	Overwrite bool
	// NoOffload copies through coffer even where the filesystem could
	// clone or copy by itself: for storage whose offload misbehaves, and
	// to measure what the offload saves.
	NoOffload bool
}

// ErrTargetExists: the copy's target exists and overwrite was not asked.
var ErrTargetExists = errors.New("the copy's target exists")

// CopyFile makes dst a copy of the regular file src: cloned if the
// filesystem can, else copied extent by extent with holes kept. The copy
// is built in an unnamed file (O_TMPFILE; see building) and given its
// name only when complete, so a crash or a failure (a full filesystem)
// leaves nothing behind, and a dst that exists is never half-written: without Overwrite
// it is refused, with it, replaced once the copy is whole.
func CopyFile(ctx context.Context, src, dst string, o CopyOptions) (CopyStats, error) {
	if !o.Overwrite {
		if _, err := os.Lstat(dst); err == nil {
			return CopyStats{}, fmt.Errorf("%w: %s", ErrTargetExists, dst)
		}
	}
	in, err := os.Open(src)
	if err != nil {
		return CopyStats{}, err
	}
	defer func() { _ = in.Close() }() // read only
	fi, err := in.Stat()
	if err != nil {
		return CopyStats{}, err
	}
	if !fi.Mode().IsRegular() {
		return CopyStats{}, fmt.Errorf("copy %s: not a regular file", src)
	}
	b, err := startBuilding(dst)
	if err != nil {
		return CopyStats{}, err
	}
	st, err := copyInto(ctx, in, b.f, fi.Size(), !o.NoOffload)
	if err == nil {
		err = b.f.Sync()
	}
	if err != nil {
		b.abandon()
		return CopyStats{}, fmt.Errorf("copy %s to %s: %w", src, dst, err)
	}
	if err := b.finish(dst, o.Overwrite); err != nil {
		return CopyStats{}, err
	}
	return st, nil
}

// copyInto clones in into out, or copies its data extents: by the
// kernel, or by coffer when the kernel cannot or offload is off.
func copyInto(ctx context.Context, in, out *os.File, size int64, offload bool) (CopyStats, error) {
	extents, err := dataExtents(in, size)
	if err != nil {
		return CopyStats{}, err
	}
	var data int64
	for _, e := range extents {
		data += e.length
	}
	if offload {
		if err := unix.IoctlFileClone(int(out.Fd()), int(in.Fd())); err == nil {
			return CopyStats{Method: Cloned, DataBytes: data}, nil
		} else if !cannot(err) {
			return CopyStats{}, fmt.Errorf("clone: %w", err)
		}
	}
	// The copy gets its full size first: then no write extends the file,
	// and XFS does not preallocate past each write's end (that space
	// would stay allocated inside what should be holes).
	if err := out.Truncate(size); err != nil {
		return CopyStats{}, err
	}
	// copy_file_range is offload too: on a filesystem with reflinks it
	// clones, on NFS the server copies.
	method := KernelCopied
	if !offload {
		method = Copied
	}
	for _, e := range extents {
		if err := ctx.Err(); err != nil {
			return CopyStats{}, err
		}
		if method == KernelCopied {
			err := kernelCopy(in, out, e)
			if err == nil {
				continue
			}
			if !cannot(err) {
				return CopyStats{}, err
			}
			method = Copied // this pair of files cannot: copy by hand from here
		}
		if err := userCopy(ctx, in, out, e); err != nil {
			return CopyStats{}, err
		}
	}
	return CopyStats{Method: method, DataBytes: data}, nil
}

// cannot reports an error that says the storage does not offer the
// primitive for these files (another filesystem, no reflinks), as opposed
// to a failure of the copy itself (no space, an I/O error).
func cannot(err error) bool {
	return errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) ||
		errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.ENOSYS)
}

type extent struct{ offset, length int64 }

// dataExtents lists the file's data, skipping its holes (SEEK_DATA and
// SEEK_HOLE; a filesystem without them reports the whole file as data).
func dataExtents(f *os.File, size int64) ([]extent, error) {
	var out []extent
	fd := int(f.Fd())
	for off := int64(0); off < size; {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole is left
		}
		if err != nil {
			return nil, fmt.Errorf("find data: %w", err)
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil {
			return nil, fmt.Errorf("find hole: %w", err)
		}
		if end > size {
			end = size
		}
		out = append(out, extent{start, end - start})
		off = end
	}
	return out, nil
}

func kernelCopy(in, out *os.File, e extent) error {
	for done := int64(0); done < e.length; {
		roff, woff := e.offset+done, e.offset+done
		n, err := unix.CopyFileRange(int(in.Fd()), &roff, int(out.Fd()), &woff, int(min(e.length-done, 1<<30)), 0)
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("copy_file_range at %d: %w", roff, io.ErrUnexpectedEOF)
		}
		done += int64(n)
	}
	return nil
}

func userCopy(ctx context.Context, in, out *os.File, e extent) error {
	buf := make([]byte, 1<<20)
	for done := int64(0); done < e.length; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(e.length-done, int64(len(buf)))
		if _, err := in.ReadAt(buf[:n], e.offset+done); err != nil {
			return err
		}
		if _, err := out.WriteAt(buf[:n], e.offset+done); err != nil {
			return err
		}
		done += n
	}
	return nil
}

// building is the file a copy is made in until it is whole: unnamed
// (O_TMPFILE), so nothing is left behind if the copy fails or coffer is
// killed; or, on a filesystem without O_TMPFILE (some network ones),
// <dst>.coffer-copy, removed on failure and replaced by the next copy to
// dst after a crash.
type building struct {
	f       *os.File
	partial string // "" while unnamed
}

// tmpfileUnsupported, set by a test, makes the filesystem look as if it
// had no O_TMPFILE.
var tmpfileUnsupported bool

func startBuilding(dst string) (*building, error) {
	dir := filepath.Dir(dst)
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if tmpfileUnsupported && err == nil {
		_ = unix.Close(fd) // unused: a test forces the fallback
		err = unix.EOPNOTSUPP
	}
	if err == nil {
		return &building{f: os.NewFile(uintptr(fd), filepath.Join(dir, "(copy)"))}, nil
	}
	if !cannot(err) && !errors.Is(err, unix.EISDIR) { // EISDIR: a kernel without O_TMPFILE
		return nil, fmt.Errorf("make a copy in %s: %w", dir, err)
	}
	partial := dst + ".coffer-copy"
	f, err := os.OpenFile(partial, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("make a copy in %s: %w", dir, err)
	}
	return &building{f: f, partial: partial}, nil
}

// abandon drops a copy that failed.
func (b *building) abandon() {
	_ = b.f.Close()
	if b.partial != "" {
		_ = os.Remove(b.partial)
	}
}

// finish gives the whole copy its name: linkat and link refuse an
// existing name; with overwrite the copy is renamed over dst (an unnamed
// one is linked as <dst>.coffer-copy first).
func (b *building) finish(dst string, overwrite bool) (err error) {
	defer func() {
		if cerr := b.f.Close(); err == nil {
			err = cerr // the copy is synced already; a failing close is still news
		}
	}()
	name := b.partial
	if name == "" {
		name = dst
		if overwrite {
			name = dst + ".coffer-copy"
			if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		proc := "/proc/self/fd/" + strconv.Itoa(int(b.f.Fd()))
		if err := unix.Linkat(unix.AT_FDCWD, proc, unix.AT_FDCWD, name, unix.AT_SYMLINK_FOLLOW); err != nil {
			if errors.Is(err, unix.EEXIST) {
				return fmt.Errorf("%w: %s", ErrTargetExists, dst)
			}
			return fmt.Errorf("name the copy %s: %w", name, err)
		}
	}
	if name != dst {
		var err error
		if overwrite {
			err = os.Rename(name, dst)
		} else if err = os.Link(name, dst); err == nil {
			err = os.Remove(name)
		}
		if err != nil {
			_ = os.Remove(name)
			if errors.Is(err, os.ErrExist) {
				return fmt.Errorf("%w: %s", ErrTargetExists, dst)
			}
			return fmt.Errorf("name the copy %s: %w", dst, err)
		}
	}
	return statefile.SyncDir(filepath.Dir(dst))
}
