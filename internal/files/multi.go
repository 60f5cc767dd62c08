package files

import (
	"io"
	"io/fs"
	"strings"
	"sync"
)

// multiFS is the root of a disk with several filesystems: /<volume>/...
//
// Every method goes through resolve (outer path to volume and inner path)
// and maps what the volume returns back with outer (inner entry to outer
// path), so a path that ReadDir or Stat shows is one that Stat, ReadDir
// and Open accept: ls, get and find all resolve paths here.
type multiFS struct {
	d    *Disk
	vols []Volume

	mu   sync.Mutex
	open map[string]FS // by volume name
}

// resolve splits "/<volume>/inner/path" into the volume's name, its open
// filesystem and "/inner/path".
func (m *multiFS) resolve(p string) (vol string, fsys FS, inner string, err error) {
	vol, rest, _ := strings.Cut(strings.TrimPrefix(clean(p), "/"), "/")
	m.mu.Lock()
	defer m.mu.Unlock()
	fsys, ok := m.open[vol]
	if !ok {
		v, err := m.d.Volume(vol)
		if err != nil {
			return "", nil, "", err
		}
		if fsys, err = m.d.FS(v); err != nil {
			return "", nil, "", err
		}
		m.open[vol] = fsys
	}
	return vol, fsys, "/" + rest, nil
}

// outer maps an entry of volume vol's filesystem to the disk's tree; the
// volume's root becomes the directory named after the volume.
func outer(vol string, e Entry) Entry {
	if e.Path == "/" {
		e.Path, e.Name = "/"+vol, vol
		return e
	}
	e.Path = "/" + vol + e.Path
	return e
}

func (m *multiFS) Stat(p string) (Entry, error) {
	if clean(p) == "/" {
		return Entry{Path: "/", Name: "/", Mode: fs.ModeDir | 0o555, UID: -1, GID: -1}, nil
	}
	vol, fsys, inner, err := m.resolve(p)
	if err != nil {
		return Entry{}, err
	}
	e, err := fsys.Stat(inner)
	if err != nil {
		return Entry{}, err
	}
	return outer(vol, e), nil
}

func (m *multiFS) ReadDir(p string) ([]Entry, error) {
	if clean(p) == "/" {
		var out []Entry
		for _, v := range m.vols {
			out = append(out, Entry{Path: "/" + v.Name, Name: v.Name, Mode: fs.ModeDir | 0o555, UID: -1, GID: -1, Size: v.Size})
		}
		return out, nil
	}
	vol, fsys, inner, err := m.resolve(p)
	if err != nil {
		return nil, err
	}
	es, err := fsys.ReadDir(inner)
	if err != nil {
		return nil, err
	}
	for i := range es {
		es[i] = outer(vol, es[i])
	}
	return es, nil
}

func (m *multiFS) Open(p string) (io.ReadCloser, error) {
	_, fsys, inner, err := m.resolve(p)
	if err != nil {
		return nil, err
	}
	return fsys.Open(inner)
}
