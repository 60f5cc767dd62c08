package files

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// Walk visits root and everything below it, depth first, directories
// before their contents; returning fs.SkipDir from fn skips a directory.
// A directory that cannot be listed (damage in the filesystem) does not
// end the walk: it comes back among the skips, and the walk goes on with
// what it can read. fn's errors, cancellation and failures to read the
// image itself (ImageReadError) end it.
func Walk(ctx context.Context, fsys FS, root string, fn func(Entry) error) ([]Skip, error) {
	e, err := fsys.Stat(root)
	if err != nil {
		return nil, err
	}
	w := walker{ctx: ctx, fsys: fsys, fn: fn}
	err = w.walk(e, 0)
	return w.skips, err
}

type walker struct {
	ctx   context.Context
	fsys  FS
	fn    func(Entry) error
	skips []Skip
}

func (w *walker) walk(e Entry, depth int) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	if depth > 256 {
		w.skips = append(w.skips, Skip{Path: e.Path, Reason: "directory nesting too deep (a loop in a damaged filesystem?)"})
		return nil
	}
	if err := w.fn(e); err != nil {
		if errors.Is(err, fs.SkipDir) {
			return nil
		}
		return err
	}
	if !e.IsDir() {
		return nil
	}
	children, err := w.fsys.ReadDir(e.Path)
	if err != nil {
		if fatal(err) {
			return err
		}
		w.skips = append(w.skips, Skip{Path: e.Path, Reason: reason("cannot list directory: ", err)})
		return nil
	}
	for _, c := range children {
		if err := w.walk(c, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// Find reports every entry below root whose name (or, when the pattern
// contains a slash, whose path) matches a shell pattern; what it could
// not search comes back as skips (see Walk).
func Find(ctx context.Context, fsys FS, root, pattern string, fn func(Entry) error) ([]Skip, error) {
	if _, err := path.Match(pattern, ""); err != nil {
		return nil, fmt.Errorf("bad pattern %q: %w", pattern, err)
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
