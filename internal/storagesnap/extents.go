package storagesnap

import (
	"os"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// ChangedFileRanges are the byte ranges of file newer that may differ
// from file older at the same offsets, by the change sets' own test
// (extentDiff): a range both files map to the same device blocks, as a
// reflink clone and its original share them until one is written, is the
// same; anything else (other blocks, a hole in one, an extent FIEMAP
// cannot vouch for, the part of newer beyond older's end) may differ.
// The ranges are in changeGranule units, so the answer may be larger than
// the change, never smaller.
func ChangedFileRanges(older, newer string) ([]hypervisor.Extent, error) {
	diff, err := fiemapDiff(older, newer)
	if err != nil {
		return nil, err
	}
	oldSize, err := fileSize(older)
	if err != nil {
		return nil, err
	}
	size, err := fileSize(newer)
	if err != nil {
		return nil, err
	}
	var out []hypervisor.Extent
	for off := int64(0); off < size; off += changeGranule {
		n := min(int64(changeGranule), size-off)
		if off+n <= oldSize && diff.same(off, off, n) {
			continue
		}
		if k := len(out); k > 0 && out[k-1].Offset+out[k-1].Length == off {
			out[k-1].Length += n
		} else {
			out = append(out, hypervisor.Extent{Offset: off, Length: n})
		}
	}
	return out, nil
}

func fileSize(path string) (int64, error) {
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// CheckReflink says whether dir's filesystem clones files (FICLONE),
// naming what the reflink provider needs when it does not.
func CheckReflink(dir string) error { return checkReflink(dir) }

// CloneFile makes dst (new) a reflink clone of src.
func CloneFile(src, dst string) error { return cloneFile(src, dst) }
