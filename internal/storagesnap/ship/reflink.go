package ship

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/storagesnap"
)

// A reflink datastore's kept snapshot is a directory of clones of the disk
// files. It is shipped file by file into a directory on a second reflink
// filesystem: against the snapshot shipped before it, each file's copy
// starts as a clone of the previous copy (which costs the DR site no
// space) and receives only the ranges the storage change sets find
// changed between the two source snapshots (storagesnap.ChangedFileRanges:
// the ranges whose device blocks the two clones no longer share). The
// first snapshot is sent whole, its holes left holes. The copy is built
// under a name of its own (partialPrefix + label), synced, renamed to the
// label, then recorded: a copy counts once recorded, and what a killed
// shipment left, under either name, is deleted by the next one.

// partialPrefix names a copy being built.
const partialPrefix = ".partial-"

// copyBuffer is the unit a range is copied in.
const copyBuffer = 1 << 20

// shipReflink ships k into to, against parent (the previous kept
// snapshot's directory at the source, whose copy is to/<its label>) when
// not empty.
func shipReflink(ctx context.Context, stateDir, to string, k storagesnap.Kept, parent string) (Shipped, error) {
	start := time.Now()
	partial := filepath.Join(to, partialPrefix+k.Label)
	if err := os.RemoveAll(partial); err != nil {
		return Shipped{}, err
	}
	parentCopy := ""
	if parent != "" {
		parentCopy = filepath.Join(to, filepath.Base(parent))
	}
	var n int64
	err := filepath.WalkDir(k.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(k.Dir, path)
		if err != nil {
			return err
		}
		dst := filepath.Join(partial, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o700)
		case !d.Type().IsRegular():
			return nil // a disk is a regular file; nothing else is coffer's
		}
		w, err := shipFile(path, dst, against(parent, rel), against(parentCopy, rel))
		n += w
		return err
	})
	if err != nil {
		return Shipped{}, fmt.Errorf("shipping %s: %w", k.Label, err)
	}
	step("streaming")
	if err := syncTree(partial); err != nil {
		return Shipped{}, err
	}
	dir := filepath.Join(to, k.Label)
	if err := os.Rename(partial, dir); err != nil {
		return Shipped{}, err
	}
	if err := syncPath(to); err != nil {
		return Shipped{}, err
	}
	step("received")
	if err := storagesnap.RecordShipped(stateDir, k.Label, to, dir); err != nil {
		return Shipped{}, fmt.Errorf("recording %s as shipped: %w", k.Label, err)
	}
	step("recorded")
	s := Shipped{Label: k.Label, Provider: k.Provider, Datastore: k.Datastore, To: to, Bytes: n, Took: time.Since(start)}
	if parent != "" {
		s.Parent = filepath.Base(parent)
	}
	return s, nil
}

// against is rel below dir when dir is set and holds it, else "".
func against(dir, rel string) string {
	if dir == "" {
		return ""
	}
	p := filepath.Join(dir, rel)
	if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
		return ""
	}
	return p
}

// shipFile makes dst equal src and returns the bytes it wrote: a clone of
// parentCopy with the ranges changed since parentSrc when both are set,
// else src's data whole.
func shipFile(src, dst, parentSrc, parentCopy string) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer func() { _ = in.Close() }() // read only
	st, err := in.Stat()
	if err != nil {
		return 0, err
	}
	var ranges []hypervisor.Extent
	if parentSrc != "" && parentCopy != "" {
		if err := storagesnap.CloneFile(parentCopy, dst); err != nil {
			return 0, err
		}
		if ranges, err = storagesnap.ChangedFileRanges(parentSrc, src); err != nil {
			return 0, err
		}
	} else if ranges, err = dataRanges(in, st.Size()); err != nil {
		return 0, err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := writeRanges(in, out, st.Size(), ranges)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// writeRanges sizes out as src and copies ranges into it, then syncs it.
func writeRanges(in, out *os.File, size int64, ranges []hypervisor.Extent) (int64, error) {
	if err := out.Truncate(size); err != nil {
		return 0, err
	}
	buf := make([]byte, copyBuffer)
	var n int64
	for _, r := range ranges {
		end := min(r.Offset+r.Length, size)
		for off := r.Offset; off < end; {
			m, err := in.ReadAt(buf[:min(int64(len(buf)), end-off)], off)
			if m > 0 {
				if _, werr := out.WriteAt(buf[:m], off); werr != nil {
					return n, werr
				}
				n += int64(m)
				off += int64(m)
			}
			if err != nil && !errors.Is(err, io.EOF) {
				return n, err
			}
			if m == 0 {
				break
			}
		}
	}
	return n, out.Sync()
}

// dataRanges are the ranges of f that hold data (SEEK_DATA, SEEK_HOLE):
// a whole shipment leaves its holes holes.
func dataRanges(f *os.File, size int64) ([]hypervisor.Extent, error) {
	var out []hypervisor.Extent
	for off := int64(0); off < size; {
		data, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
		if errors.Is(err, unix.ENXIO) {
			break // only a hole up to the end
		}
		if err != nil {
			return nil, err
		}
		hole, err := unix.Seek(int(f.Fd()), data, unix.SEEK_HOLE)
		if err != nil {
			return nil, err
		}
		out = append(out, hypervisor.Extent{Offset: data, Length: hole - data})
		off = hole
	}
	return out, nil
}

// syncTree syncs every directory of the copy (its files are synced as
// they are written).
func syncTree(root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		return syncPath(path)
	})
}

func syncPath(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }() // read only
	return f.Sync()
}

// dropUnrecordedCopies deletes what a killed reflink shipment left in to:
// a copy being built, or a copy renamed into place but not recorded.
func dropUnrecordedCopies(to string) error {
	entries, err := os.ReadDir(to)
	if err != nil {
		return err
	}
	there, err := storagesnap.List(to)
	if err != nil {
		return err
	}
	recorded := map[string]bool{}
	for _, k := range there {
		recorded[k.Label] = true
	}
	for _, e := range entries {
		name := e.Name()
		label := strings.TrimPrefix(name, partialPrefix)
		if !e.IsDir() || !storagesnap.LabelOK(label) || (name == label && recorded[label]) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(to, name)); err != nil {
			return fmt.Errorf("deleting %s, left by an interrupted shipment: %w", filepath.Join(to, name), err)
		}
	}
	return nil
}
