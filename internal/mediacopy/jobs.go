package mediacopy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/coffer-backup/coffer/internal/media/format"
	"github.com/coffer-backup/coffer/internal/media/volume"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/store/local"
)

// CopyOptions tune a copy to media.
type CopyOptions struct {
	Pool      string
	BlockSize int
	volume.WriteOptions
	// SpoolDir receives each point's spool while it is written (default:
	// the system's temporary directory); a point needs room for its
	// stored bytes there.
	SpoolDir string
	// Catalogue, if set, is the media catalogue's knowledge of the
	// volumes (volume.Pool.Catalogue).
	Catalogue map[string]volume.Catalogued
	// DriveSlot, if set, is waited for before a drive of CopyOnDrives
	// writes, and released when its session has ended: the engine's
	// limits (the library's drive-limit, limits.tasks), so that the
	// drives written at once stay within them. bytes is what the drive
	// is to write.
	DriveSlot func(ctx context.Context, drive int, bytes int64) (release func(), err error)
}

// Copy writes backup points of src to a media pool of lib, one stream
// per point, multiplexed. The volumes' indexes in the result are what the
// catalogue records.
func Copy(ctx context.Context, src *repo.Repository, snaps []*repo.Point, lib *volume.Library, o CopyOptions) (*volume.WriteResult, error) {
	return copyOn(ctx, src, snaps, lib, o, nil)
}

func copyOn(ctx context.Context, src *repo.Repository, snaps []*repo.Point, lib *volume.Library, o CopyOptions,
	claims *volume.Claims) (*volume.WriteResult, error) {
	if len(snaps) == 0 {
		return nil, errors.New("no backup point selected")
	}
	pool := &volume.Pool{Lib: lib, Name: o.Pool, BlockSize: o.BlockSize, Catalogue: o.Catalogue, Claims: claims}
	v, err := pool.First(ctx)
	if err != nil {
		return nil, err
	}
	var sources []volume.Source
	for _, snap := range snaps {
		sources = append(sources, volume.Source{
			Info: format.StreamInfo{Point: snap.ID.String(), VM: snap.Source.VMName, Repository: src.Config().ID, Time: snap.Time.UTC()},
			Open: func(ctx context.Context) (io.ReadCloser, error) { return openPoint(ctx, src, snap, o.SpoolDir) },
		})
	}
	return volume.WriteSession(ctx, v, pool, sources, o.WriteOptions)
}

// openPoint spools a point and returns its stream; closing it removes the
// spool.
func openPoint(ctx context.Context, src *repo.Repository, snap *repo.Point, spoolDir string) (io.ReadCloser, error) {
	dir, err := os.MkdirTemp(spoolDir, "coffer-media-spool-")
	if err != nil {
		return nil, err
	}
	repoDir := filepath.Join(dir, "repo")
	if err := SpoolPoint(ctx, src, snap, repoDir); err != nil {
		_ = os.RemoveAll(dir) // best effort after the error returned
		return nil, fmt.Errorf("spool point %s: %w", snap.ID.Short(), err)
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(WriteStream(ctx, repoDir, pw)) }()
	return &spooled{PipeReader: pr, dir: dir}, nil
}

type spooled struct {
	*io.PipeReader
	dir string
}

func (s *spooled) Close() error {
	_ = s.PipeReader.Close() // the reading side: always nil
	return removeAll(s.dir)
}

// Staged is a backup point read back from media into a repository of its
// own.
type Staged struct {
	Repo  *repo.Repository
	Point *repo.Point
	Read  volume.ReadStats
	dir   string
}

// Close closes the staged repository and removes it.
func (s *Staged) Close() error {
	if s.Repo != nil {
		s.Repo.Close()
	}
	return removeAll(s.dir)
}

// Stage reads a point's stream from the media, positioned by its
// catalogued segments, into a repository under stageDir, and opens it
// with password (the source repository's: its key files travel with the
// point). Nothing of the source repository is needed.
func Stage(ctx context.Context, m volume.Mounter, segs []volume.Placed, stageDir string, password []byte, ro volume.ReadOptions) (*Staged, error) {
	if len(segs) == 0 {
		return nil, errors.New("no segment to read")
	}
	dir, err := os.MkdirTemp(stageDir, "coffer-media-stage-")
	if err != nil {
		return nil, err
	}
	s := &Staged{dir: dir}
	repoDir := filepath.Join(dir, "repo")
	pr, pw := io.Pipe()
	readErr := make(chan error, 1)
	go func() {
		st, err := volume.ReadStream(ctx, m, segs, pw, ro)
		s.Read = st
		pw.CloseWithError(err)
		readErr <- err
	}()
	err = ReadStream(ctx, pr, repoDir)
	if err == nil {
		// Read the stream to its end, so that every block of it is
		// checked (sequence, end of stream), whatever follows the archive.
		_, err = io.Copy(io.Discard, pr)
	}
	pr.CloseWithError(errors.New("stage ended"))
	if rerr := <-readErr; rerr != nil {
		err = rerr // the media error says more than the short stream it caused
	}
	if err != nil {
		_ = s.Close() // best effort after the error returned
		return nil, err
	}
	st, err := local.Open(repoDir)
	if err != nil {
		_ = s.Close() // best effort after the error returned
		return nil, err
	}
	r, err := repo.Open(ctx, st, password, repo.Options{})
	if err != nil {
		_ = st.Close()
		_ = s.Close() // best effort after the error returned
		return nil, err
	}
	s.Repo = r
	if s.Point, err = r.FindPoint(ctx, segs[0].Point); err != nil {
		_ = s.Close() // best effort after the error returned
		return nil, fmt.Errorf("the stream read from the media lacks point %s: %w", segs[0].Point, err)
	}
	return s, nil
}

// Choose picks, among the catalogued segments of one point (it may have
// been copied several times), one complete copy: the segments of one
// session that hold the stream from its first block to its end.
func Choose(segs []volume.Placed) ([]volume.Placed, error) {
	bySession := map[format.SessionID][]volume.Placed{}
	var order []format.SessionID
	for _, s := range segs {
		if _, ok := bySession[s.Session]; !ok {
			order = append(order, s.Session)
		}
		bySession[s.Session] = append(bySession[s.Session], s)
	}
	err := errors.New("no copy of the point in the media catalogue")
	for _, sid := range order {
		ss := bySession[sid]
		slices.SortFunc(ss, func(a, b volume.Placed) int { return cmp.Compare(a.FirstSeq, b.FirstSeq) })
		next := uint64(0)
		for _, s := range ss {
			if s.FirstSeq != next {
				break
			}
			next = s.LastSeq + 1
		}
		if last := ss[len(ss)-1]; last.LastSeq+1 == next && last.End {
			return ss, nil
		}
		err = fmt.Errorf("point %s: the catalogue lacks part of its copy (a volume not catalogued? run coffer media catalog)", ss[0].Point)
	}
	return nil, err
}
