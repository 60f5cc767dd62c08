package files

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"time"
)

// Tar writes paths (files or trees) as a tar archive (PAX), keeping names,
// modes, owners and times; symlinks are stored as links. Like Zip, entries
// that cannot be read when opened are skipped and listed, and a file that
// fails halfway ends the archive with ErrArchiveIncomplete (its header
// already promised its size), so the caller must discard it. Tar suits
// streaming: nothing is buffered and no central directory is kept.
func Tar(ctx context.Context, fsys FS, paths []string, w io.Writer) (*ExtractStats, error) {
	st := &ExtractStats{Skipped: []Skip{}}
	roots, err := statAll(fsys, paths)
	if err != nil {
		return st, err
	}
	tw := tar.NewWriter(w)
	for _, root := range roots {
		skips, err := Walk(ctx, fsys, root.Path, func(e Entry) error {
			h := &tar.Header{Name: relName(root, e), Mode: int64(e.Mode.Perm() | e.Mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)),
				ModTime: e.MTime, AccessTime: e.ATime, ChangeTime: e.CTime, Format: tar.FormatPAX}
			if h.ModTime.IsZero() {
				h.ModTime = time.Unix(0, 0)
			}
			if e.UID >= 0 && e.GID >= 0 {
				h.Uid, h.Gid = e.UID, e.GID
			}
			switch {
			case e.IsDir():
				h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
				st.Dirs++
				return tw.WriteHeader(h)
			case e.Mode&fs.ModeSymlink != 0:
				if e.Link == "" {
					st.skip(e, symlinkProblem(e))
					return nil
				}
				h.Typeflag, h.Linkname = tar.TypeSymlink, e.Link
				st.Links++
				return tw.WriteHeader(h)
			case e.Mode.IsRegular():
				rc, err := fsys.Open(e.Path)
				if err != nil && !fatal(err) {
					st.skip(e, reason("unreadable: ", err))
					return nil
				}
				if err != nil {
					return err
				}
				defer rc.Close()
				h.Typeflag, h.Size = tar.TypeReg, e.Size
				if err := tw.WriteHeader(h); err != nil {
					return err
				}
				n, err := copyFile(tw, rc, e)
				if skippable(err) {
					return fmt.Errorf("%s: %w: %w", e.Path, ErrArchiveIncomplete, err)
				}
				if err != nil {
					return err
				}
				st.Files++
				st.Bytes += n
				return nil
			}
			st.skip(e, kindName(e.Mode)+": not archived")
			return nil
		})
		st.Skipped = append(st.Skipped, skips...)
		if err != nil {
			return st, err
		}
	}
	return st, tw.Close()
}
