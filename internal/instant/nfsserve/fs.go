package nfsserve

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"time"

	billy "github.com/go-git/go-billy/v5"
	"github.com/go-git/go-billy/v5/osfs"
)

// FS is what the export serves: a real directory (the disks' descriptors,
// and whatever the hypervisor writes there: the VM's configuration, logs,
// swap, locks) with each disk's flat extent laid over it as a file that
// reads from the backup point and writes to its overlay. The flat files
// cannot be removed, renamed, truncated or created anew: they are the
// point's disks.
type FS struct {
	billy.Filesystem
	disks   map[string]*Overlay // clean path -> overlay
	started time.Time
}

var (
	_ billy.Filesystem = (*FS)(nil)
	_ billy.Change     = (*FS)(nil)
)

// NewFS serves directory root with disks (by path under root, as
// "vm/vm_0-flat.vmdk") laid over it.
func NewFS(root string, disks map[string]*Overlay) *FS {
	d := map[string]*Overlay{}
	for p, o := range disks {
		d[clean(p)] = o
	}
	return &FS{Filesystem: osfs.New(root, osfs.WithBoundOS()), disks: d, started: time.Now()}
}

// clean is a path's key: relative to the root, without dots.
func clean(name string) string { return path.Clean("/" + name)[1:] }

func (f *FS) disk(name string) (*Overlay, bool) {
	o, ok := f.disks[clean(name)]
	return o, ok
}

func denied(op, name string) error {
	return &fs.PathError{Op: op, Path: name, Err: fs.ErrPermission}
}

// Create implements billy.Basic.
func (f *FS) Create(name string) (billy.File, error) {
	if _, ok := f.disk(name); ok {
		return nil, denied("create", name)
	}
	return f.Filesystem.Create(name)
}

// Open implements billy.Basic.
func (f *FS) Open(name string) (billy.File, error) { return f.OpenFile(name, os.O_RDONLY, 0) }

// OpenFile implements billy.Basic.
func (f *FS) OpenFile(name string, flag int, perm os.FileMode) (billy.File, error) {
	o, ok := f.disk(name)
	if !ok {
		return f.Filesystem.OpenFile(name, flag, perm)
	}
	if flag&(os.O_TRUNC|os.O_EXCL|os.O_APPEND) != 0 {
		return nil, denied("open", name)
	}
	return &diskFile{name: name, o: o, writable: flag&(os.O_WRONLY|os.O_RDWR) != 0}, nil
}

// Stat implements billy.Basic.
func (f *FS) Stat(name string) (os.FileInfo, error) {
	if o, ok := f.disk(name); ok {
		return diskInfo{name: path.Base(clean(name)), size: o.Size(), mod: f.started}, nil
	}
	return f.Filesystem.Stat(name)
}

// Lstat implements billy.Symlink.
func (f *FS) Lstat(name string) (os.FileInfo, error) {
	if _, ok := f.disk(name); ok {
		return f.Stat(name)
	}
	return f.Filesystem.Lstat(name)
}

// Rename implements billy.Basic.
func (f *FS) Rename(from, to string) error {
	_, a := f.disk(from)
	_, b := f.disk(to)
	if a || b {
		return denied("rename", from)
	}
	return f.Filesystem.Rename(from, to)
}

// Remove implements billy.Basic.
func (f *FS) Remove(name string) error {
	if _, ok := f.disk(name); ok {
		return denied("remove", name)
	}
	return f.Filesystem.Remove(name)
}

// ReadDir implements billy.Dir: the directory's files and the flat
// extents in it, by name.
func (f *FS) ReadDir(dir string) ([]os.FileInfo, error) {
	infos, err := f.Filesystem.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	byName := map[string]os.FileInfo{}
	for _, i := range infos {
		byName[i.Name()] = i
	}
	d := clean(dir)
	for p, o := range f.disks {
		if path.Dir(p) == d || d == "" && path.Dir(p) == "." {
			byName[path.Base(p)] = diskInfo{name: path.Base(p), size: o.Size(), mod: f.started}
		}
	}
	out := make([]os.FileInfo, 0, len(byName))
	for _, i := range byName {
		out = append(out, i)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

// Chroot implements billy.Chroot: the export is served whole.
func (f *FS) Chroot(string) (billy.Filesystem, error) {
	return nil, fmt.Errorf("nfsserve: the export cannot be served in parts: %w", fs.ErrPermission)
}

// Chmod implements billy.Change; a flat extent's mode is fixed.
func (f *FS) Chmod(name string, mode os.FileMode) error {
	if _, ok := f.disk(name); ok {
		return nil
	}
	return os.Chmod(f.Join(f.Root(), clean(name)), mode)
}

// Lchown implements billy.Change: ownership is the server's.
func (f *FS) Lchown(string, int, int) error { return nil }

// Chown implements billy.Change: ownership is the server's.
func (f *FS) Chown(string, int, int) error { return nil }

// Chtimes implements billy.Change; a flat extent's times are the
// export's.
func (f *FS) Chtimes(name string, atime, mtime time.Time) error {
	if _, ok := f.disk(name); ok {
		return nil
	}
	return os.Chtimes(f.Join(f.Root(), clean(name)), atime, mtime)
}

// diskInfo describes a flat extent.
type diskInfo struct {
	name string
	size int64
	mod  time.Time
}

func (i diskInfo) Name() string       { return i.name }
func (i diskInfo) Size() int64        { return i.size }
func (i diskInfo) Mode() os.FileMode  { return 0o600 }
func (i diskInfo) ModTime() time.Time { return i.mod }
func (i diskInfo) IsDir() bool        { return false }
func (i diskInfo) Sys() any           { return nil }

// diskFile is an open flat extent.
type diskFile struct {
	name     string
	o        *Overlay
	pos      int64
	writable bool
}

func (d *diskFile) Name() string { return d.name }

func (d *diskFile) Read(p []byte) (int, error) {
	n, err := d.o.ReadAt(p, d.pos)
	d.pos += int64(n)
	return n, err
}

func (d *diskFile) ReadAt(p []byte, off int64) (int, error) { return d.o.ReadAt(p, off) }

func (d *diskFile) Write(p []byte) (int, error) {
	if !d.writable {
		return 0, denied("write", d.name)
	}
	n, err := d.o.WriteAt(p, d.pos)
	d.pos += int64(n)
	return n, err
}

func (d *diskFile) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		off += d.pos
	case io.SeekEnd:
		off += d.o.Size()
	default:
		return d.pos, fs.ErrInvalid
	}
	if off < 0 {
		return d.pos, fs.ErrInvalid
	}
	d.pos = off
	return off, nil
}

// Close: every write is on stable storage when it returns.
func (d *diskFile) Close() error { return nil }
func (d *diskFile) Lock() error  { return nil }
func (d *diskFile) Unlock() error {
	return nil
}

// Truncate keeps a flat extent at its disk's size.
func (d *diskFile) Truncate(size int64) error {
	if size == d.o.Size() {
		return nil
	}
	return denied("truncate", d.name)
}
