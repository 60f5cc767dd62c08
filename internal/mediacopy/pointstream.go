// Package mediacopy joins repositories and sequential media: a backup
// point becomes a stream (a self-contained repository holding that point
// alone, as a tar archive of its objects), streams are written to a media
// pool, and a stream read back from the media becomes a repository again
// that coffer's readers restore from (docs/design/media-format.md).
package mediacopy

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/local"
	"github.com/coffer-backup/coffer/internal/transfer"
)

// streamPrefixes are the objects a point's stream carries, metadata
// first: a reader has the keys, manifest and maps before any data.
var streamPrefixes = []string{"config", "keys/", "snapshots/", "maps/", "index/", "data/"}

// SpoolPoint copies one backup point of src into a new repository in dir
// (a clone of src: same keys, so no re-encryption), holding exactly the
// point's chunks.
func SpoolPoint(ctx context.Context, src *repo.Repository, snap *repo.Point, dir string) error {
	st, err := local.Create(dir)
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := src.Clone(ctx, st)
	if err != nil {
		return err
	}
	_, err = transfer.Copy(ctx, src, c, transfer.Options{Select: func(s *repo.Point) bool { return s.ID == snap.ID }})
	return err
}

// WriteStream writes the repository in dir as a tar archive of its
// objects.
func WriteStream(ctx context.Context, dir string, w io.Writer) error {
	st, err := local.Open(dir)
	if err != nil {
		return err
	}
	defer st.Close()
	tw := tar.NewWriter(w)
	for _, prefix := range streamPrefixes {
		var objs []store.ObjectInfo
		err := st.List(ctx, prefix, func(fi store.ObjectInfo) error {
			if prefix != "config" || fi.Name == "config" {
				objs = append(objs, fi)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, fi := range objs {
			if err := writeObject(ctx, st, tw, fi); err != nil {
				return fmt.Errorf("%s: %w", fi.Name, err)
			}
		}
	}
	return tw.Close()
}

func writeObject(ctx context.Context, st store.Store, tw *tar.Writer, fi store.ObjectInfo) error {
	hdr := &tar.Header{Name: fi.Name, Size: fi.Size, Mode: 0o600, ModTime: fi.ModTime.UTC().Truncate(time.Second), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	rc, err := st.Read(ctx, fi.Name, 0, -1)
	if err != nil {
		return err
	}
	defer rc.Close()
	n, err := io.Copy(tw, rc)
	if err == nil && n != fi.Size {
		err = fmt.Errorf("read %d bytes of %d", n, fi.Size)
	}
	return err
}

// ReadStream unpacks a point's stream into a new repository in dir. Every
// entry must be a regular file named like a repository object; anything
// else is refused, so a damaged or foreign stream cannot write outside
// dir or plant other files.
func ReadStream(ctx context.Context, r io.Reader, dir string) error {
	st, err := local.Create(dir)
	if err != nil {
		return err
	}
	defer st.Close()
	tr := tar.NewReader(r)
	seen := 0
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("point stream: %w", err)
		}
		if err := checkEntry(hdr); err != nil {
			return fmt.Errorf("point stream: %w", err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		w, err := st.Create(ctx, hdr.Name, store.PutOptions{SizeHint: hdr.Size})
		if err != nil {
			return err
		}
		n, err := io.Copy(w, tr)
		if err == nil && n != hdr.Size {
			err = fmt.Errorf("point stream: %s: %d bytes of %d", hdr.Name, n, hdr.Size)
		}
		if err != nil {
			_ = w.Abort() // the copy's error is what matters
			return err
		}
		if _, err := w.Commit(); err != nil {
			return err
		}
		seen++
	}
	if seen == 0 {
		return errors.New("point stream: empty")
	}
	return nil
}

func checkEntry(h *tar.Header) error {
	if h.Typeflag != tar.TypeReg {
		return fmt.Errorf("entry %q is not a regular file", h.Name)
	}
	if h.Size < 0 || strings.Contains(h.Name, "..") || strings.HasPrefix(h.Name, "/") || strings.ContainsAny(h.Name, "\\\x00") {
		return fmt.Errorf("entry %q is not a repository object", h.Name)
	}
	for _, p := range streamPrefixes {
		if h.Name == "config" || (p != "config" && strings.HasPrefix(h.Name, p) && len(h.Name) > len(p)) {
			return nil
		}
	}
	return fmt.Errorf("entry %q is not a repository object", h.Name)
}

// removeAll removes a spool or staging directory, reporting failure only
// through the returned error of the caller's choosing.
func removeAll(dir string) error { return os.RemoveAll(dir) }
