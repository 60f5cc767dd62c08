package files

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/masahiro331/go-xfs-filesystem/xfs"
)

// xfsFS adapts github.com/masahiro331/go-xfs-filesystem. Every call into
// the library goes through xfsCall (xfslib.go): the library is not safe
// for concurrent use and logs through a global logger.
type xfsFS struct {
	fs       *xfs.FileSystem
	bigtime  bool
	symlinks *xfsSymlinks
	warn     func(string)
}

func openXFS(v Volume, warn func(string)) (FS, error) {
	var (
		f   *xfs.FileSystem
		err error
	)
	xfsCall(warn, func() { f, err = xfs.NewFS(*io.NewSectionReader(v.r, 0, v.Size), nil) })
	if err != nil {
		return nil, err
	}
	sb := f.PrimaryAG.SuperBlock
	return &xfsFS{fs: f, bigtime: sb.HasBigtime(), symlinks: newXFSSymlinks(v.r, v.Size, sb), warn: warn}, nil
}

// call runs fn as the only caller of the library.
func (x *xfsFS) call(fn func()) { xfsCall(x.warn, fn) }

// rel turns "/a/b" into the library's "a/b" ("" is the root).
func rel(p string) string { return strings.TrimPrefix(p, "/") }

func (x *xfsFS) entry(p string, fi fs.FileInfo) Entry {
	e := Entry{Path: p, Name: path.Base(p), Mode: fi.Mode(), Size: fi.Size(), MTime: fi.ModTime(), UID: -1, GID: -1}
	if fi.IsDir() {
		e.Size = 0
	}
	ino := x.inodeExtras(fi, &e)
	e.Ino = ino
	if e.Mode&fs.ModeSymlink != 0 && e.Link == "" {
		// Not in the inode: a target in blocks, which the library skips.
		link, err := x.symlinks.target(ino)
		if err != nil {
			e.Unreadable = reason("symlink target unreadable: ", err)
		}
		e.Link = link
	}
	return e
}

// inodeExtras reads what the library parses but does not export: owner,
// atime/ctime and symlink targets stored in the inode; it returns the
// inode number. reflect reads unexported fields without unsafe; the
// library version is pinned and the tests check these fields, so a layout
// change is caught, and then only the extras are lost.
func (x *xfsFS) inodeExtras(fi fs.FileInfo, e *Entry) (ino uint64) {
	defer func() { _ = recover() }()
	v := reflect.ValueOf(fi)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	in := v.FieldByName("inode")
	if !in.IsValid() || in.IsNil() {
		return 0
	}
	core := in.Elem().FieldByName("inodeCore")
	ino = core.FieldByName("Ino").Uint()
	e.UID = int(core.FieldByName("UID").Uint())
	e.GID = int(core.FieldByName("GID").Uint())
	e.ATime = xfsTime(core.FieldByName("Atime").Uint(), x.bigtime)
	e.CTime = xfsTime(core.FieldByName("Ctime").Uint(), x.bigtime)
	if link := in.Elem().FieldByName("symlinkString"); link.IsValid() && !link.IsNil() {
		e.Link = link.Elem().FieldByName("Name").String()
	}
	return ino
}

// xfsTime decodes an XFS timestamp (legacy sec/nsec or bigtime).
func xfsTime(ts uint64, bigtime bool) time.Time {
	if bigtime {
		return time.Unix(int64(ts/1e9)-(1<<31), int64(ts%1e9))
	}
	return time.Unix(int64(int32(ts>>32)), int64(ts&0xffffffff))
}

func (x *xfsFS) Stat(p string) (e Entry, err error) {
	x.call(func() { e, err = x.stat(p) })
	return e, err
}

func (x *xfsFS) stat(p string) (Entry, error) {
	if p == "/" {
		fi, err := x.fs.ReadDirInfo("/")
		if err != nil {
			return Entry{}, err
		}
		e := x.entry("/", fi)
		e.Name = "/"
		return e, nil
	}
	// Stat through the parent listing: the library's own Stat opens files
	// and refuses symlinks.
	des, err := x.fs.ReadDir(rel(path.Dir(p)))
	if err != nil {
		return Entry{}, xfsNotExist(p, err)
	}
	for _, de := range des {
		if de.Name() == path.Base(p) {
			fi, err := de.Info()
			if err != nil {
				return Entry{}, err
			}
			return x.entry(p, fi), nil
		}
	}
	return Entry{}, fmt.Errorf("%s: %w", p, fs.ErrNotExist)
}

func (x *xfsFS) ReadDir(p string) (es []Entry, err error) {
	x.call(func() { es, err = x.readDir(p) })
	return es, err
}

func (x *xfsFS) readDir(p string) ([]Entry, error) {
	des, err := x.fs.ReadDir(rel(p))
	if err != nil {
		return nil, xfsNotExist(p, err)
	}
	out := make([]Entry, 0, len(des))
	for _, de := range des {
		fi, err := de.Info()
		if err != nil {
			return nil, err
		}
		out = append(out, x.entry(path.Join(p, de.Name()), fi))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (x *xfsFS) Open(p string) (io.ReadCloser, error) {
	e, err := x.Stat(p)
	if err != nil {
		return nil, err
	}
	if !e.Mode.IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	var f fs.File
	x.call(func() { f, err = x.fs.Open(rel(p)) })
	if err != nil && strings.Contains(err.Error(), "unsupported inode") {
		// The library's message holds the whole inode structure.
		return nil, errors.New("XFS inode with its data in a form this reader does not know (damaged?)")
	}
	if err != nil {
		return nil, xfsNotExist(p, err)
	}
	return &xfsFile{f: f, x: x}, nil
}

// xfsFile reads a file through the library, one call at a time.
type xfsFile struct {
	f fs.File
	x *xfsFS
}

func (l *xfsFile) Read(p []byte) (n int, err error) {
	l.x.call(func() { n, err = l.f.Read(p) })
	if err != nil && !errors.Is(err, io.EOF) {
		return n, fmt.Errorf("xfs read: %w", err)
	}
	return n, err
}

func (l *xfsFile) Close() error { return l.f.Close() }

// xfsNotExist keeps the library's errors as they are (they name the
// path) unless it says fs.ErrNotExist: the message-based mapping of
// notExist would take its "not found entries" (a directory inode it
// cannot read) for a missing path.
func xfsNotExist(p string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s: %w", p, fs.ErrNotExist)
	}
	return err
}
