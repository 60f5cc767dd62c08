package files

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/diskfs/go-diskfs/filesystem"
	"github.com/diskfs/go-diskfs/filesystem/ext4"
	"github.com/diskfs/go-diskfs/filesystem/fat32"
)

// diskfsFS adapts go-diskfs' ext4 and FAT32 readers.
type diskfsFS struct {
	fs  filesystem.FileSystem
	fat bool
	// ext4 reads ext4 file contents (see ext4Extents); nil for FAT.
	ext4 *ext4Extents
}

func openDiskfs(v Volume) (FS, error) {
	st := &readerStorage{r: v.r, size: v.Size}
	switch v.Type {
	case TypeExt4:
		f, err := ext4.Read(st, v.Size, 0, 512)
		if err != nil {
			return nil, err
		}
		x, err := newExt4Extents(v.r, v.Size)
		if err != nil {
			return nil, err
		}
		return &diskfsFS{fs: f, ext4: x}, nil
	case TypeFAT:
		f, err := fat32.Read(st, v.Size, 0, 512)
		if err != nil {
			return nil, err
		}
		return &diskfsFS{fs: f, fat: true}, nil
	}
	return nil, ErrUnsupported
}

func (d *diskfsFS) entry(p string, fi fs.FileInfo) Entry {
	e := Entry{Path: p, Name: path.Base(p), Mode: fi.Mode(), Size: fi.Size(), MTime: fi.ModTime(), UID: -1, GID: -1}
	if p == "/" {
		e.Name = "/"
	}
	if st, ok := fi.Sys().(*ext4.StatT); ok && st != nil {
		e.UID, e.GID = int(st.UID), int(st.GID)
		e.ATime, e.CTime = st.AccessTime, st.ChangeTime
		e.Link = st.LinkTarget
		e.Ino = uint64(st.Ino)
	}
	if d.fat {
		// FAT stores no permissions or owners.
		if fi.IsDir() {
			e.Mode = fs.ModeDir | 0o755
		} else {
			e.Mode = 0o644
		}
	}
	if e.Mode&fs.ModeSymlink == 0 {
		e.Link = ""
	}
	if fi.IsDir() {
		e.Size = 0
	}
	return e
}

func (d *diskfsFS) Stat(p string) (Entry, error) {
	if p == "/" {
		return Entry{Path: "/", Name: "/", Mode: fs.ModeDir | 0o755, UID: -1, GID: -1}, nil
	}
	fi, err := d.fs.Stat(fsPath(p))
	if err != nil {
		return Entry{}, notExist(p, err)
	}
	return d.entry(p, fi), nil
}

func (d *diskfsFS) ReadDir(p string) ([]Entry, error) {
	des, err := d.fs.ReadDir(fsPath(p))
	if err != nil {
		return nil, notExist(p, err)
	}
	out := make([]Entry, 0, len(des))
	for _, de := range des {
		if de.Name() == "." || de.Name() == ".." {
			continue
		}
		child := path.Join(p, de.Name())
		fi, err := de.Info()
		if err == nil && !d.fat {
			// go-diskfs v1.9.4's ReadDir entries carry only the file type,
			// not the permission bits; Stat reads the whole inode.
			fi, err = d.fs.Stat(fsPath(child))
		}
		if err != nil {
			return nil, err
		}
		out = append(out, d.entry(child, fi))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (d *diskfsFS) Open(p string) (io.ReadCloser, error) {
	e, err := d.Stat(p)
	if err != nil {
		return nil, err
	}
	if !e.Mode.IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", p)
	}
	if e.Size == 0 {
		// go-diskfs cannot open empty FAT files (no start cluster).
		return io.NopCloser(strings.NewReader("")), nil
	}
	if d.ext4 != nil && e.Ino != 0 {
		r, err := d.ext4.open(uint32(e.Ino))
		if !errors.Is(err, errNoExtentTree) {
			return r, err
		}
	}
	f, err := d.fs.Open(fsPath(p))
	if err != nil {
		return nil, notExist(p, err)
	}
	return f, nil
}

// fsPath converts "/a/b" to the io/fs form go-diskfs expects ("a/b", ".").
func fsPath(p string) string {
	if p == "/" {
		return "."
	}
	return strings.TrimPrefix(p, "/")
}

// notExist maps the readers' various "not found" errors to fs.ErrNotExist
// and keeps every other error (damage) as it is.
func notExist(p string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return err
	}
	msg := err.Error()
	if strings.Contains(msg, "not exist") || strings.Contains(msg, "not found") || strings.Contains(msg, "File not found") {
		return fmt.Errorf("%s: %w", p, fs.ErrNotExist)
	}
	return fmt.Errorf("%s: %w", p, err)
}
