package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/store"
)

// CopyFrom makes name a copy of the object fromName of another local
// store: cloned by the filesystem where both are on one with reflinks
// (FICLONE: the copy shares the source's extents), else copied by the
// kernel (copy_file_range), else through coffer. Like Create, the copy is
// made in tmp/, synced, and linked under name only when whole (a crash
// leaves a temp file, which RemoveLeftovers removes); an existing name is
// refused with ErrExists. A store of another kind: errors.ErrUnsupported.
// Retention is not a local feature and is ignored, as Create does.
func (s *Store) CopyFrom(ctx context.Context, from store.Store, fromName, name string, _ store.PutOptions) (store.ObjectInfo, store.CopyMethod, error) {
	src, ok := store.Innermost(from).(*Store)
	if !ok {
		return store.ObjectInfo{}, "", fmt.Errorf("copy from %s: %w", from.Properties().Location, errors.ErrUnsupported)
	}
	srcPath, err := src.path(fromName)
	if err != nil {
		return store.ObjectInfo{}, "", err
	}
	final, err := s.path(name)
	if err != nil {
		return store.ObjectInfo{}, "", err
	}
	if err := s.prepare(); err != nil {
		return store.ObjectInfo{}, "", err
	}
	in, err := os.Open(srcPath)
	if err != nil {
		return store.ObjectInfo{}, "", translate(fmt.Errorf("copy %s: %w", fromName, err))
	}
	defer func() { _ = in.Close() }() // read only
	fi, err := in.Stat()
	if err != nil {
		return store.ObjectInfo{}, "", translate(err)
	}
	var rnd [12]byte
	_, _ = rand.Read(rnd[:])
	tmp := filepath.Join(s.root, tmpDir, hex.EncodeToString(rnd[:]))
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return store.ObjectInfo{}, "", translate(fmt.Errorf("copy to %s: %w", name, err))
	}
	method, err := cloneOrCopy(ctx, in, out, fi.Size())
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.ensureDir(filepath.Dir(final))
	}
	if err == nil {
		err = s.install(tmp, final, store.PutOptions{IfNotExists: true})
	}
	if err != nil {
		_ = os.Remove(tmp)
		return store.ObjectInfo{}, "", translate(fmt.Errorf("copy to %s: %w", name, err))
	}
	if err := syncDir(filepath.Dir(final)); err != nil {
		return store.ObjectInfo{}, "", translate(fmt.Errorf("fsync directory of %s: %w", name, err))
	}
	info, err := s.Stat(context.WithoutCancel(ctx), name)
	return info, method, err
}

// cloneOrCopy fills out, an empty file, with the size bytes of in.
func cloneOrCopy(ctx context.Context, in, out *os.File, size int64) (store.CopyMethod, error) {
	err := unix.IoctlFileClone(int(out.Fd()), int(in.Fd()))
	if err == nil {
		return store.CopyCloned, nil
	}
	if !cannot(err) {
		return "", fmt.Errorf("clone: %w", err)
	}
	var done int64
	for done < size {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		roff, woff := done, done
		n, err := unix.CopyFileRange(int(in.Fd()), &roff, int(out.Fd()), &woff, int(min(size-done, 1<<30)), 0)
		if err != nil && done == 0 && cannot(err) {
			break // the kernel cannot copy between these files: coffer does
		}
		if err != nil {
			return "", fmt.Errorf("copy_file_range: %w", err)
		}
		if n == 0 {
			return "", fmt.Errorf("copy_file_range at %d: %w", done, io.ErrUnexpectedEOF)
		}
		done += int64(n)
	}
	if done == size {
		return store.CopyKernel, nil
	}
	// Plain reads and writes: io.Copy between two files would try
	// copy_file_range again.
	_, err = io.Copy(struct{ io.Writer }{out}, struct{ io.Reader }{in})
	return store.CopyThroughHost, err
}

// cannot reports an error saying the storage does not offer the
// primitive for these files (another filesystem, no reflinks), as
// opposed to a failure of the copy itself (no space, an I/O error).
func cannot(err error) bool {
	return errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) ||
		errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.ENOSYS)
}
