package files

import (
	"archive/tar"
	"archive/zip"
	"context"
	"fmt"
	"io"
	"io/fs"
	"time"
)

// Zip writes paths (files or trees) as a zip archive, keeping names,
// modes and modification times; symlinks are stored as links. Entries
// that cannot be read when opened are skipped like in Extract; a file
// that fails halfway ends the archive with ErrArchiveIncomplete (a zip
// entry cannot be taken back), so the caller must discard it.
func Zip(ctx context.Context, fsys FS, paths []string, w io.Writer) (*ExtractStats, error) {
	return archive(ctx, fsys, paths, zipWriter{zip.NewWriter(w)})
}

// Tar writes paths (files or trees) as a tar archive (PAX), keeping names,
// modes, owners and times; symlinks are stored as links. Like Zip, entries
// that cannot be read when opened are skipped and listed, and a file that
// fails halfway ends the archive with ErrArchiveIncomplete (its header
// already promised its size), so the caller must discard it. Tar suits
// streaming: nothing is buffered and no central directory is kept.
func Tar(ctx context.Context, fsys FS, paths []string, w io.Writer) (*ExtractStats, error) {
	return archive(ctx, fsys, paths, tarWriter{tar.NewWriter(w)})
}

// entryWriter writes the entries of one archive format; archive walks the
// trees and applies the rules of what is skipped once for every format.
type entryWriter interface {
	dir(name string, e Entry) error
	symlink(name string, e Entry) error
	file(name string, e Entry, r io.Reader) (int64, error)
	Close() error
}

func archive(ctx context.Context, fsys FS, paths []string, aw entryWriter) (*ExtractStats, error) {
	st := &ExtractStats{Skipped: []Skip{}}
	roots, err := statAll(fsys, paths)
	if err != nil {
		return st, err
	}
	for _, root := range roots {
		skips, err := Walk(ctx, fsys, root.Path, func(e Entry) error {
			name := relName(root, e)
			switch {
			case e.IsDir():
				st.Dirs++
				return aw.dir(name, e)
			case e.Mode&fs.ModeSymlink != 0:
				if e.Link == "" {
					st.skip(e, symlinkProblem(e))
					return nil
				}
				st.Links++
				return aw.symlink(name, e)
			case e.Mode.IsRegular():
				return archiveFile(fsys, st, aw, name, e)
			}
			st.skip(e, kindName(e.Mode)+": not archived")
			return nil
		})
		st.Skipped = append(st.Skipped, skips...)
		if err != nil {
			return st, err
		}
	}
	return st, aw.Close()
}

// archiveFile writes one regular file: one that cannot be opened is
// skipped, one that fails halfway ends the archive.
func archiveFile(fsys FS, st *ExtractStats, aw entryWriter, name string, e Entry) error {
	rc, err := fsys.Open(e.Path)
	if err != nil && !fatal(err) {
		st.skip(e, reason("unreadable: ", err))
		return nil
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	n, err := aw.file(name, e, rc)
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

// orEpoch stands in 1970 for a time the file system did not record.
func orEpoch(t time.Time) time.Time {
	if t.IsZero() {
		return time.Unix(0, 0)
	}
	return t
}

type zipWriter struct{ *zip.Writer }

func (z zipWriter) header(name string, e Entry) *zip.FileHeader {
	h := &zip.FileHeader{Name: name, Method: zip.Deflate, Modified: orEpoch(e.MTime)}
	h.SetMode(e.Mode)
	return h
}

func (z zipWriter) dir(name string, e Entry) error {
	h := z.header(name+"/", e)
	h.Method = zip.Store
	_, err := z.CreateHeader(h)
	return err
}

func (z zipWriter) symlink(name string, e Entry) error {
	w, err := z.CreateHeader(z.header(name, e))
	if err == nil {
		_, err = io.WriteString(w, e.Link)
	}
	return err
}

func (z zipWriter) file(name string, e Entry, r io.Reader) (int64, error) {
	w, err := z.CreateHeader(z.header(name, e))
	if err != nil {
		return 0, err
	}
	return copyFile(w, r, e)
}

type tarWriter struct{ *tar.Writer }

func (t tarWriter) header(name string, e Entry) *tar.Header {
	h := &tar.Header{Name: name, Mode: int64(e.Mode.Perm() | e.Mode&(fs.ModeSetuid|fs.ModeSetgid|fs.ModeSticky)),
		ModTime: orEpoch(e.MTime), AccessTime: e.ATime, ChangeTime: e.CTime, Format: tar.FormatPAX}
	if e.UID >= 0 && e.GID >= 0 {
		h.Uid, h.Gid = e.UID, e.GID
	}
	return h
}

func (t tarWriter) dir(name string, e Entry) error {
	h := t.header(name+"/", e)
	h.Typeflag = tar.TypeDir
	return t.WriteHeader(h)
}

func (t tarWriter) symlink(name string, e Entry) error {
	h := t.header(name, e)
	h.Typeflag, h.Linkname = tar.TypeSymlink, e.Link
	return t.WriteHeader(h)
}

func (t tarWriter) file(name string, e Entry, r io.Reader) (int64, error) {
	h := t.header(name, e)
	h.Typeflag, h.Size = tar.TypeReg, e.Size
	if err := t.WriteHeader(h); err != nil {
		return 0, err
	}
	return copyFile(t, r, e)
}
