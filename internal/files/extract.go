package files

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// ExtractStats count what Extract or Zip did. Skipped lists every entry
// left out and why: special files, symlinks whose target cannot be read,
// files and directories that damage makes unreadable.
type ExtractStats struct {
	Files   int    `json:"files"`
	Dirs    int    `json:"dirs"`
	Links   int    `json:"links"`
	Bytes   int64  `json:"bytes"`
	Skipped []Skip `json:"skipped"`
}

// ErrArchiveIncomplete reports a file that failed halfway into a zip or tar
// archive.
var ErrArchiveIncomplete = errors.New("a file failed halfway into the archive, which is therefore incomplete")

func (st *ExtractStats) skip(e Entry, why string) {
	st.Skipped = append(st.Skipped, Skip{Path: e.Path, Reason: why})
}

// sourceError is a failure to read one file from the image (damage), as
// opposed to one to write it out.
type sourceError struct{ err error }

func (s sourceError) Error() string { return s.err.Error() }
func (s sourceError) Unwrap() error { return s.err }

// skippable reports a read failure confined to one entry.
func skippable(err error) bool {
	var se sourceError
	return errors.As(err, &se) && !fatal(err)
}

// statAll resolves every path before anything is written, so that a
// mistyped path fails the command without a partial result.
func statAll(fsys FS, paths []string) ([]Entry, error) {
	roots := make([]Entry, 0, len(paths))
	for _, p := range paths {
		e, err := fsys.Stat(p)
		if err != nil {
			return nil, err
		}
		roots = append(roots, e)
	}
	return roots, nil
}

// relName is e's path relative to the parent of the walked root, so that
// each path given lands under its base name.
func relName(root, e Entry) string {
	base := path.Dir(root.Path)
	rel := strings.TrimPrefix(strings.TrimPrefix(e.Path, base), "/")
	if rel == "" {
		rel = path.Base(e.Path)
	}
	return rel
}

// Extract copies paths (files or whole trees) from fsys into dir, keeping
// modes, times, symlinks, and owners when running as root. Each path lands
// under dir by its base name. Nothing outside dir is ever written. What
// cannot be extracted is listed in the stats' Skipped and the rest goes on.
func Extract(ctx context.Context, fsys FS, paths []string, dir string) (*ExtractStats, error) {
	st := &ExtractStats{Skipped: []Skip{}}
	roots, err := statAll(fsys, paths)
	if err != nil {
		return st, err
	}
	top, err := filepath.Abs(dir)
	if err != nil {
		return st, err
	}
	if err := os.MkdirAll(top, 0o755); err != nil {
		return st, err
	}
	var dirTimes []Entry
	var dirTargets []string
	for _, root := range roots {
		skips, err := Walk(ctx, fsys, root.Path, func(e Entry) error {
			target := filepath.Join(top, filepath.FromSlash(relName(root, e)))
			if !strings.HasPrefix(target, top+string(filepath.Separator)) && target != top {
				return fmt.Errorf("refusing to write outside %s: %s", top, e.Path)
			}
			switch {
			case e.IsDir():
				if err := os.MkdirAll(target, 0o700); err != nil {
					return err
				}
				dirTimes, dirTargets = append(dirTimes, e), append(dirTargets, target)
				st.Dirs++
			case e.Mode&fs.ModeSymlink != 0:
				if e.Link == "" {
					st.skip(e, symlinkProblem(e))
					return nil
				}
				_ = os.Remove(target)
				if err := os.Symlink(e.Link, target); err != nil {
					return err
				}
				applyOwner(target, e, true)
				st.Links++
			case e.Mode.IsRegular():
				n, err := extractFile(fsys, e, target)
				if skippable(err) {
					st.skip(e, reason("unreadable: ", err))
					return nil
				}
				if err != nil {
					return err
				}
				st.Files++
				st.Bytes += n
			default:
				st.skip(e, kindName(e.Mode)+": not extracted")
			}
			return nil
		})
		st.Skipped = append(st.Skipped, skips...)
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

func symlinkProblem(e Entry) string {
	if e.Unreadable != "" {
		return e.Unreadable
	}
	return "symlink target unknown"
}

// extractFile writes one file through a temporary name, so that a file
// that fails halfway leaves nothing behind. Failures to read it from the
// image come back as sourceError.
func extractFile(fsys FS, e Entry, target string) (int64, error) {
	rc, err := fsys.Open(e.Path)
	if err != nil {
		return 0, sourceError{err}
	}
	defer rc.Close()
	tmp := target + ".coffer-partial"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := copyFile(f, rc, e)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp) // best effort after the error returned
		return n, err
	}
	if err := os.Rename(tmp, target); err != nil {
		return n, err
	}
	applyMeta(target, e)
	return n, nil
}

// copyFile copies e's Size bytes from rc to w; read failures and a short
// file are sourceErrors.
func copyFile(w io.Writer, rc io.Reader, e Entry) (int64, error) {
	src := &readTracker{r: io.LimitReader(rc, e.Size)}
	n, err := io.Copy(w, src)
	if src.err != nil {
		return n, sourceError{src.err}
	}
	if err == nil && n != e.Size {
		return n, sourceError{fmt.Errorf("the file ends after %d of %d bytes", n, e.Size)}
	}
	return n, err
}

// readTracker remembers a read error, telling it apart from write errors
// io.Copy returns the same way.
type readTracker struct {
	r   io.Reader
	err error
}

func (t *readTracker) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && err != io.EOF {
		t.err = err
	}
	return n, err
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
