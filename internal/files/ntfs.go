package files

import (
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"

	ntfs "www.velocidex.com/golang/go-ntfs/parser"
)

// ntfsFS adapts www.velocidex.com/golang/go-ntfs. The parser caches
// internally and is not documented as concurrency-safe, hence the mutex.
type ntfsFS struct {
	mu  sync.Mutex
	ctx *ntfs.NTFSContext
}

func openNTFS(v Volume) (FS, error) {
	ctx, err := ntfs.GetNTFSContext(io.NewSectionReader(v.r, 0, v.Size), 0)
	if err != nil {
		return nil, err
	}
	return &ntfsFS{ctx: ctx}, nil
}

func (n *ntfsFS) entryFor(p string, fi *ntfs.FileInfo) Entry {
	e := Entry{Path: p, Name: path.Base(p), Size: fi.Size, MTime: fi.Mtime, ATime: fi.Atime, CTime: fi.Ctime, UID: -1, GID: -1, Mode: 0o644}
	if fi.IsDir {
		e.Mode, e.Size = fs.ModeDir|0o755, 0
	}
	return e
}

func (n *ntfsFS) dir(p string) (*ntfs.MFT_ENTRY, error) {
	root, err := n.ctx.GetMFT(5) // the root directory's MFT record
	if err != nil {
		return nil, err
	}
	if p == "/" {
		return root, nil
	}
	return root.Open(n.ctx, strings.TrimPrefix(p, "/"))
}

// listing hides NTFS metadata files ($MFT, $Bitmap, ...) and the "."
// entry, and keeps one name per file (the Win32 long name).
func visible(fi *ntfs.FileInfo) bool {
	return fi.Name != "" && fi.Name != "." && !strings.HasPrefix(fi.Name, "$") && !fi.IsSlack
}

func (n *ntfsFS) ReadDir(p string) ([]Entry, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	d, err := n.dir(p)
	if err != nil {
		return nil, notExist(p, err)
	}
	var out []Entry
	seen := map[string]bool{}
	for _, fi := range ntfs.ListDir(n.ctx, d) {
		if !visible(fi) || seen[fi.Name] {
			continue
		}
		seen[fi.Name] = true
		out = append(out, n.entryFor(path.Join(p, fi.Name), fi))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (n *ntfsFS) Stat(p string) (Entry, error) {
	if p == "/" {
		return Entry{Path: "/", Name: "/", Mode: fs.ModeDir | 0o755, UID: -1, GID: -1}, nil
	}
	entries, err := n.ReadDir(path.Dir(p))
	if err != nil {
		return Entry{}, err
	}
	for _, e := range entries {
		if strings.EqualFold(e.Name, path.Base(p)) {
			return e, nil
		}
	}
	return Entry{}, fmt.Errorf("%s: %w", p, fs.ErrNotExist)
}

func (n *ntfsFS) Open(p string) (io.ReadCloser, error) {
	e, err := n.Stat(p)
	if err != nil {
		return nil, err
	}
	if e.IsDir() {
		return nil, fmt.Errorf("%s is a directory", p)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	data, err := ntfs.GetDataForPath(n.ctx, strings.TrimPrefix(p, "/"))
	if err != nil {
		return nil, notExist(p, err)
	}
	return &ntfsReader{r: io.NewSectionReader(data, 0, e.Size), mu: &n.mu}, nil
}

type ntfsReader struct {
	r  *io.SectionReader
	mu *sync.Mutex
}

func (r *ntfsReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.r.Read(p)
}

func (r *ntfsReader) Close() error { return nil }
