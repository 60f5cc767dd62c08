package storagesnap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
)

// reflinkKind clones each disk file of the batch (FICLONE: the clone
// shares every extent with the original, so it costs metadata only and
// takes milliseconds) into <root>/.coffer-snap/<label>/, keeping each
// file's path below the root. A clone of one file is atomic; the engine
// keeps the VMs stopped across all clones, which makes the set one
// instant.
type reflinkKind struct{}

func (reflinkKind) create(ctx context.Context, j *journal, disks []hypervisor.DiskInfo) error {
	if err := checkReflink(j.Root); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(j.Root, SnapDir), 0o700); err != nil {
		return err
	}
	// Mkdir, not MkdirAll: a directory of that name that coffer did not
	// just journal is someone else's and is left alone.
	if err := os.Mkdir(j.Dir, 0o700); err != nil {
		return err
	}
	step("dir")
	for _, d := range disks {
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := relPath(j.Root, d.Path)
		if err != nil {
			return err
		}
		dst := filepath.Join(j.Dir, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return err
		}
		if err := cloneFile(d.Path, dst); err != nil {
			return err
		}
		step("clone")
	}
	return nil
}

func (reflinkKind) present(_ context.Context, j *journal) (string, error) { return j.Dir, nil }

// remove deletes the journaled clone directory; a directory that is not
// <root>/.coffer-snap/<label> is never removed, whatever a journal says.
func (reflinkKind) remove(_ context.Context, j *journal) error {
	if j.Dir != filepath.Join(j.Root, SnapDir, j.Label) || !labelRE.MatchString(j.Label) {
		return fmt.Errorf("journal names %s, which is not a coffer snapshot directory: left alone", j.Dir)
	}
	return os.RemoveAll(j.Dir)
}

func cloneFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }() // read only
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	err = unix.IoctlFileClone(int(out.Fd()), int(in.Fd()))
	if err != nil {
		err = reflinkError(src, err)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

func reflinkError(path string, err error) error {
	if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EXDEV) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOTTY) {
		return fmt.Errorf("%w: %s cannot be cloned (%v): the reflink provider needs its datastore on XFS formatted with reflink=1 "+
			"(mkfs.xfs -m reflink=1) or on btrfs, with the disk files and the datastore root on one filesystem; "+
			"otherwise use another provider, or storage-fallback: vm", hypervisor.ErrStorageUnsupported, path, err)
	}
	return fmt.Errorf("clone %s: %w", path, err)
}

// checkReflink clones between two unnamed temporary files in the root
// (O_TMPFILE): it proves the filesystem clones without creating any name
// a crash could leave behind.
func checkReflink(root string) error {
	st, err := os.Stat(root)
	if err != nil {
		return fmt.Errorf("datastore %s: %w", root, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("datastore %s is not a directory", root)
	}
	a, err := unix.Open(root, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("datastore %s: cannot make a temporary file to test reflinks: %w", root, err)
	}
	defer func() { _ = unix.Close(a) }() // unnamed: closing discards it
	b, err := unix.Open(root, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("datastore %s: cannot make a temporary file to test reflinks: %w", root, err)
	}
	defer func() { _ = unix.Close(b) }()
	if _, err := unix.Pwrite(a, make([]byte, 4096), 0); err != nil {
		return err
	}
	if err := unix.IoctlFileClone(b, a); err != nil {
		return reflinkError(root, err)
	}
	return nil
}

func openImage(ctx context.Context, file, format string) (hypervisor.DiskReader, error) {
	return qemu.OpenImage(ctx, file, imageFormat(format), 4)
}

// imageFormat is QEMU's name of a disk's format. A vSphere disk's file is
// its VMDK descriptor, whatever its extents are (vmdk-flat is a flat
// extent, VMFS in the descriptor): QEMU's vmdk driver reads the
// descriptor and then the extents it names, beside it.
func imageFormat(format string) string {
	if format == "vmdk-flat" {
		return "vmdk"
	}
	return format
}
