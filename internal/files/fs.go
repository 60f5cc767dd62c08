package files

import (
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"
)

// FS is a read-only file tree. Paths are absolute and slash-separated.
type FS interface {
	// Stat describes a path without following a final symlink.
	Stat(p string) (Entry, error)
	// ReadDir lists a directory, sorted by name.
	ReadDir(p string) ([]Entry, error)
	// Open reads a regular file.
	Open(p string) (io.ReadCloser, error)
}

// Entry describes a file. Fields a filesystem cannot provide are zero
// (UID/GID -1 when unknown).
type Entry struct {
	Path  string      `json:"path"`
	Name  string      `json:"name"`
	Mode  fs.FileMode `json:"mode"`
	Size  int64       `json:"size"`
	UID   int         `json:"uid"`
	GID   int         `json:"gid"`
	MTime time.Time   `json:"mtime"`
	ATime time.Time   `json:"atime,omitzero"`
	CTime time.Time   `json:"ctime,omitzero"`
	Link  string      `json:"link,omitempty"` // symlink target
	Ino   uint32      `json:"inode,omitempty"`
}

// IsDir reports a directory.
func (e Entry) IsDir() bool { return e.Mode.IsDir() }

// clean normalises a user path to "/a/b".
func clean(p string) string {
	return path.Clean("/" + strings.TrimSpace(p))
}

// guarded wraps an FS so that a panic inside a third-party reader (corrupt
// input) becomes an error instead of crashing coffer.
type guarded struct {
	fsys FS
	what string
}

func guard(what string, err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%s: damaged data made the reader fail (%v)", what, r)
	}
}

func (g guarded) Stat(p string) (e Entry, err error) {
	defer guard(g.what, &err)
	return g.fsys.Stat(clean(p))
}

func (g guarded) ReadDir(p string) (es []Entry, err error) {
	defer guard(g.what, &err)
	return g.fsys.ReadDir(clean(p))
}

func (g guarded) Open(p string) (rc io.ReadCloser, err error) {
	defer guard(g.what, &err)
	rc, err = g.fsys.Open(clean(p))
	if err != nil {
		return nil, err
	}
	return &guardedReader{rc: rc, what: g.what}, nil
}

type guardedReader struct {
	rc   io.ReadCloser
	what string
}

func (g *guardedReader) Read(p []byte) (n int, err error) {
	defer guard(g.what, &err)
	return g.rc.Read(p)
}

func (g *guardedReader) Close() error { return g.rc.Close() }

// multiFS is the root of a disk with several filesystems: /<volume>/...
type multiFS struct {
	d    *Disk
	vols []Volume
	open map[string]FS
}

func (m *multiFS) split(p string) (FS, string, error) {
	p = clean(p)
	name, rest, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	fsys, ok := m.open[name]
	if !ok {
		v, err := m.d.Volume(name)
		if err != nil {
			return nil, "", err
		}
		if fsys, err = m.d.FS(v); err != nil {
			return nil, "", err
		}
		m.open[name] = fsys
	}
	return fsys, "/" + rest, nil
}

func (m *multiFS) prefix(name string, e Entry) Entry {
	e.Path = "/" + name + e.Path
	if e.Path != "/" && strings.HasSuffix(e.Path, "/") {
		e.Path = strings.TrimSuffix(e.Path, "/")
	}
	return e
}

func (m *multiFS) Stat(p string) (Entry, error) {
	if clean(p) == "/" {
		return Entry{Path: "/", Name: "/", Mode: fs.ModeDir | 0o555, UID: -1, GID: -1}, nil
	}
	fsys, rest, err := m.split(p)
	if err != nil {
		return Entry{}, err
	}
	e, err := fsys.Stat(rest)
	if rest == "/" {
		e.Name = strings.Split(strings.TrimPrefix(clean(p), "/"), "/")[0]
	}
	return m.prefix(e.Name, e), err
}

func (m *multiFS) ReadDir(p string) ([]Entry, error) {
	if clean(p) == "/" {
		var out []Entry
		for _, v := range m.vols {
			out = append(out, Entry{Path: "/" + v.Name, Name: v.Name, Mode: fs.ModeDir | 0o555, UID: -1, GID: -1, Size: v.Size})
		}
		return out, nil
	}
	fsys, rest, err := m.split(p)
	if err != nil {
		return nil, err
	}
	name := strings.Split(strings.TrimPrefix(clean(p), "/"), "/")[0]
	es, err := fsys.ReadDir(rest)
	for i := range es {
		es[i] = m.prefix(name, es[i])
	}
	return es, err
}

func (m *multiFS) Open(p string) (io.ReadCloser, error) {
	fsys, rest, err := m.split(p)
	if err != nil {
		return nil, err
	}
	return fsys.Open(rest)
}
