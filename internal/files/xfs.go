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
	"sync"
	"time"

	"github.com/masahiro331/go-xfs-filesystem/xfs"
)

// xfsFS adapts github.com/masahiro331/go-xfs-filesystem. The library is not
// safe for concurrent use (it seeks one shared reader), hence the mutex.
type xfsFS struct {
	mu      sync.Mutex
	fs      *xfs.FileSystem
	bigtime bool
}

func openXFS(v Volume) (FS, error) {
	f, err := xfs.NewFS(*io.NewSectionReader(v.r, 0, v.Size), nil)
	if err != nil {
		return nil, err
	}
	return &xfsFS{fs: f, bigtime: f.PrimaryAG.SuperBlock.HasBigtime()}, nil
}

// rel turns "/a/b" into the library's "a/b" ("" is the root).
func rel(p string) string { return strings.TrimPrefix(p, "/") }

func (x *xfsFS) entry(p string, fi fs.FileInfo) Entry {
	e := Entry{Path: p, Name: path.Base(p), Mode: fi.Mode(), Size: fi.Size(), MTime: fi.ModTime(), UID: -1, GID: -1}
	if fi.IsDir() {
		e.Size = 0
	}
	x.inodeExtras(fi, &e)
	return e
}

// inodeExtras reads what the library parses but does not export: owner,
// atime/ctime and symlink targets. reflect reads unexported fields without
// unsafe; the library version is pinned and the tests check these fields,
// so a layout change is caught, and then only the extras are lost.
func (x *xfsFS) inodeExtras(fi fs.FileInfo, e *Entry) {
	defer func() { _ = recover() }()
	v := reflect.ValueOf(fi)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	in := v.FieldByName("inode")
	if !in.IsValid() || in.IsNil() {
		return
	}
	core := in.Elem().FieldByName("inodeCore")
	e.UID = int(core.FieldByName("UID").Uint())
	e.GID = int(core.FieldByName("GID").Uint())
	e.ATime = xfsTime(core.FieldByName("Atime").Uint(), x.bigtime)
	e.CTime = xfsTime(core.FieldByName("Ctime").Uint(), x.bigtime)
	if link := in.Elem().FieldByName("symlinkString"); link.IsValid() && !link.IsNil() {
		e.Link = link.Elem().FieldByName("Name").String()
	}
}

// xfsTime decodes an XFS timestamp (legacy sec/nsec or bigtime).
func xfsTime(ts uint64, bigtime bool) time.Time {
	if bigtime {
		return time.Unix(int64(ts/1e9)-(1<<31), int64(ts%1e9))
	}
	return time.Unix(int64(int32(ts>>32)), int64(ts&0xffffffff))
}

func (x *xfsFS) Stat(p string) (Entry, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
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
		return Entry{}, notExist(p, err)
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

func (x *xfsFS) ReadDir(p string) ([]Entry, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	des, err := x.fs.ReadDir(rel(p))
	if err != nil {
		return nil, notExist(p, err)
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
	x.mu.Lock()
	f, err := x.fs.Open(rel(p))
	x.mu.Unlock()
	if err != nil {
		return nil, notExist(p, err)
	}
	return &lockedFile{f: f, mu: &x.mu}, nil
}

// lockedFile serialises reads with other calls into the same library
// instance.
type lockedFile struct {
	f  fs.File
	mu *sync.Mutex
}

func (l *lockedFile) Read(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.f.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		return n, fmt.Errorf("xfs read: %w", err)
	}
	return n, err
}

func (l *lockedFile) Close() error { return l.f.Close() }
