package files

import (
	"fmt"
	"io"
	"io/fs"
	"path"
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
	Ino   uint64      `json:"inode,omitempty"`
	// Unreadable says why part of the entry could not be read (today: a
	// symlink target in damaged blocks); the entry is still listed.
	Unreadable string `json:"unreadable,omitempty"`
}

// IsDir reports a directory.
func (e Entry) IsDir() bool { return e.Mode.IsDir() }

// clean normalises a user path to "/a/b". Spaces are part of names (a
// name may begin or end with one), so none are trimmed.
func clean(p string) string {
	return path.Clean("/" + p)
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
