package files

import (
	"archive/zip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// Walk visits root and everything below it, depth first, directories
// before their contents. Returning fs.SkipDir from fn skips a directory.
func Walk(ctx context.Context, fsys FS, root string, fn func(Entry) error) error {
	e, err := fsys.Stat(root)
	if err != nil {
		return err
	}
	return walk(ctx, fsys, e, fn, 0)
}

func walk(ctx context.Context, fsys FS, e Entry, fn func(Entry) error, depth int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if depth > 256 {
		return fmt.Errorf("%s: directory nesting too deep (a loop in a damaged filesystem?)", e.Path)
	}
	if err := fn(e); err != nil {
		if errors.Is(err, fs.SkipDir) {
			return nil
		}
		return err
	}
	if !e.IsDir() {
		return nil
	}
	children, err := fsys.ReadDir(e.Path)
	if err != nil {
		return err
	}
	for _, c := range children {
		if err := walk(ctx, fsys, c, fn, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// Find reports every entry below root whose name (or, when the pattern
// contains a slash, whose path) matches a shell pattern.
func Find(ctx context.Context, fsys FS, root, pattern string, fn func(Entry) error) error {
	if _, err := path.Match(pattern, ""); err != nil {
		return fmt.Errorf("bad pattern %q: %w", pattern, err)
	}
	byPath := strings.Contains(pattern, "/")
	return Walk(ctx, fsys, root, func(e Entry) error {
		subject := e.Name
		if byPath {
			subject = e.Path
		}
		if ok, _ := path.Match(pattern, subject); ok {
			return fn(e)
		}
		return nil
	})
}

// ExtractStats count what Extract did.
type ExtractStats struct {
	Files, Dirs, Links int
	Bytes              int64
	Skipped            []string // devices, sockets, unreadable links
}

// Extract copies paths (files or whole trees) from fsys into dir, keeping
// modes, times, symlinks, and owners when running as root. Each path lands
// under dir by its base name. Nothing outside dir is ever written.
func Extract(ctx context.Context, fsys FS, paths []string, dir string) (*ExtractStats, error) {
	st := &ExtractStats{}
	root, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	var dirTimes []Entry
	var dirTargets []string
	for _, p := range paths {
		base := path.Dir(clean(p))
		err := Walk(ctx, fsys, p, func(e Entry) error {
			rel := strings.TrimPrefix(strings.TrimPrefix(e.Path, base), "/")
			if rel == "" {
				rel = path.Base(e.Path)
			}
			target := filepath.Join(root, filepath.FromSlash(rel))
			if !strings.HasPrefix(target, root+string(filepath.Separator)) && target != root {
				return fmt.Errorf("refusing to write outside %s: %s", root, e.Path)
			}
			switch {
			case e.IsDir():
				if err := os.MkdirAll(target, 0o700); err != nil {
					return err
				}
				dirTimes, dirTargets = append(dirTimes, e), append(dirTargets, target)
				st.Dirs++
				return nil
			case e.Mode&fs.ModeSymlink != 0:
				if e.Link == "" {
					st.Skipped = append(st.Skipped, e.Path+" (symlink target unknown)")
					return nil
				}
				_ = os.Remove(target)
				if err := os.Symlink(e.Link, target); err != nil {
					return err
				}
				applyOwner(target, e, true)
				st.Links++
				return nil
			case e.Mode.IsRegular():
				n, err := extractFile(fsys, e, target)
				if err != nil {
					return err
				}
				st.Files++
				st.Bytes += n
				return nil
			}
			st.Skipped = append(st.Skipped, e.Path+" ("+e.Mode.Type().String()+")")
			return nil
		})
		if err != nil {
			return st, err
		}
	}
	// Directory metadata last (deepest first): writing children changes
	// a directory's mtime, and a read-only mode would block them.
	for i := len(dirTimes) - 1; i >= 0; i-- {
		applyMeta(dirTargets[i], dirTimes[i])
	}
	return st, nil
}

func extractFile(fsys FS, e Entry, target string) (int64, error) {
	rc, err := fsys.Open(e.Path)
	if err != nil {
		return 0, err
	}
	defer rc.Close()
	tmp := target + ".coffer-partial"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(f, io.LimitReader(rc, e.Size))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != e.Size {
		err = fmt.Errorf("%s: read %d of %d bytes", e.Path, n, e.Size)
	}
	if err != nil {
		os.Remove(tmp)
		return n, err
	}
	if err := os.Rename(tmp, target); err != nil {
		return n, err
	}
	applyMeta(target, e)
	return n, nil
}

// applyMeta sets mode, owner (as root) and times; failures to set
// metadata are not errors (e.g. a non-root user cannot chown).
func applyMeta(target string, e Entry) {
	applyOwner(target, e, false)
	_ = os.Chmod(target, e.Mode.Perm()|e.Mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky))
	atime := e.ATime
	if atime.IsZero() {
		atime = e.MTime
	}
	if !e.MTime.IsZero() {
		_ = os.Chtimes(target, atime, e.MTime)
	}
}

func applyOwner(target string, e Entry, link bool) {
	if os.Geteuid() != 0 || e.UID < 0 || e.GID < 0 {
		return
	}
	if link {
		_ = os.Lchown(target, e.UID, e.GID)
		return
	}
	_ = os.Chown(target, e.UID, e.GID)
}

// Zip writes paths (files or trees) as a zip archive, keeping names,
// modes and modification times; symlinks are stored as links.
func Zip(ctx context.Context, fsys FS, paths []string, w io.Writer) (*ExtractStats, error) {
	st := &ExtractStats{}
	zw := zip.NewWriter(w)
	for _, p := range paths {
		base := path.Dir(clean(p))
		err := Walk(ctx, fsys, p, func(e Entry) error {
			name := strings.TrimPrefix(strings.TrimPrefix(e.Path, base), "/")
			if name == "" {
				name = path.Base(e.Path)
			}
			h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: e.MTime}
			if h.Modified.IsZero() {
				h.Modified = time.Unix(0, 0)
			}
			h.SetMode(e.Mode)
			switch {
			case e.IsDir():
				h.Name += "/"
				h.Method = zip.Store
				_, err := zw.CreateHeader(h)
				st.Dirs++
				return err
			case e.Mode&fs.ModeSymlink != 0:
				w, err := zw.CreateHeader(h)
				if err == nil {
					_, err = io.WriteString(w, e.Link)
				}
				st.Links++
				return err
			case e.Mode.IsRegular():
				w, err := zw.CreateHeader(h)
				if err != nil {
					return err
				}
				rc, err := fsys.Open(e.Path)
				if err != nil {
					return err
				}
				n, err := io.Copy(w, io.LimitReader(rc, e.Size))
				rc.Close()
				st.Files++
				st.Bytes += n
				return err
			}
			st.Skipped = append(st.Skipped, e.Path)
			return nil
		})
		if err != nil {
			return st, err
		}
	}
	return st, zw.Close()
}
