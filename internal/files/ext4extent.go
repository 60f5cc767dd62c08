package files

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
)

// ext4Extents reads regular ext4 files through their extent trees. It
// exists because go-diskfs v1.9.4 concatenates a file's extents ignoring
// their logical offsets, so files with holes (sparse files, and many that
// mkfs.ext4 -d or a guest's allocator leave with gaps) come out shifted.
// Here every extent lands at its logical offset; holes and unwritten
// (preallocated) extents read as zeros. Files without an extent tree
// (inline data, ext2/3 block maps) are left to go-diskfs.
type ext4Extents struct {
	r              io.ReaderAt
	volumeSize     int64
	blockSize      int64
	inodesPerGroup int64
	inodeSize      int64
	descSize       int64
	gdtOffset      int64
	groups         int64
}

var errNoExtentTree = errors.New("ext4: file has no extent tree")

const (
	ext4ExtentsFlag    = 0x80000
	ext4InlineDataFlag = 0x10000000
	ext4ExtentMagic    = 0xF30A
	ext4MaxDepth       = 5
	ext4MaxExtents     = 1 << 22 // a corrupt tree must not exhaust memory
)

func newExt4Extents(r io.ReaderAt, volumeSize int64) (*ext4Extents, error) {
	sb := make([]byte, 1024)
	if _, err := r.ReadAt(sb, 1024); err != nil {
		return nil, fmt.Errorf("ext4 superblock: %w", err)
	}
	le := binary.LittleEndian
	if le.Uint16(sb[56:]) != 0xEF53 {
		return nil, errors.New("ext4: bad superblock magic")
	}
	logBlock := le.Uint32(sb[24:])
	if logBlock > 6 {
		return nil, errors.New("ext4: implausible block size")
	}
	e := &ext4Extents{r: r, volumeSize: volumeSize, blockSize: 1024 << logBlock,
		inodesPerGroup: int64(le.Uint32(sb[40:])), inodeSize: int64(le.Uint16(sb[88:])), descSize: 32}
	if le.Uint32(sb[96:])&0x80 != 0 { // 64bit
		if d := int64(le.Uint16(sb[254:])); d >= 32 {
			e.descSize = d
		}
	}
	if e.inodesPerGroup == 0 || e.inodeSize < 128 || e.inodeSize > e.blockSize {
		return nil, errors.New("ext4: implausible inode geometry")
	}
	e.gdtOffset = (int64(le.Uint32(sb[20:])) + 1) * e.blockSize
	e.groups = (int64(le.Uint32(sb[0:])) + e.inodesPerGroup - 1) / e.inodesPerGroup
	return e, nil
}

// ext4Extent maps length bytes at logical to physical (bytes).
type ext4Extent struct {
	logical, physical, length int64
	unwritten                 bool
}

// open returns a reader of inode ino's size bytes.
func (e *ext4Extents) open(ino uint32) (io.ReadCloser, error) {
	if ino == 0 || int64(ino) > e.groups*e.inodesPerGroup {
		return nil, fmt.Errorf("ext4: inode %d out of range", ino)
	}
	group, index := (int64(ino)-1)/e.inodesPerGroup, (int64(ino)-1)%e.inodesPerGroup
	desc := make([]byte, e.descSize)
	if _, err := e.r.ReadAt(desc, e.gdtOffset+group*e.descSize); err != nil {
		return nil, fmt.Errorf("ext4 group descriptor %d: %w", group, err)
	}
	le := binary.LittleEndian
	table := int64(le.Uint32(desc[8:]))
	if e.descSize >= 64 {
		table |= int64(le.Uint32(desc[0x28:])) << 32
	}
	inode := make([]byte, 160)
	if _, err := e.r.ReadAt(inode[:128], table*e.blockSize+index*e.inodeSize); err != nil {
		return nil, fmt.Errorf("ext4 inode %d: %w", ino, err)
	}
	flags := le.Uint32(inode[0x20:])
	if flags&ext4ExtentsFlag == 0 || flags&ext4InlineDataFlag != 0 {
		return nil, errNoExtentTree
	}
	size := int64(le.Uint32(inode[4:])) | int64(le.Uint32(inode[0x6C:]))<<32
	if size < 0 {
		return nil, fmt.Errorf("ext4 inode %d: bad size", ino)
	}
	var extents []ext4Extent
	if err := e.walk(inode[0x28:0x28+60], 0, &extents); err != nil {
		return nil, fmt.Errorf("ext4 inode %d: %w", ino, err)
	}
	sort.Slice(extents, func(i, j int) bool { return extents[i].logical < extents[j].logical })
	return io.NopCloser(io.NewSectionReader(&ext4FileReader{e: e, extents: extents}, 0, size)), nil
}

// walk collects the leaf extents of the (sub)tree whose node is b.
func (e *ext4Extents) walk(b []byte, level int, out *[]ext4Extent) error {
	le := binary.LittleEndian
	if len(b) < 12 || le.Uint16(b) != ext4ExtentMagic {
		return errors.New("bad extent header")
	}
	entries, depth := int(le.Uint16(b[2:])), int(le.Uint16(b[6:]))
	if depth > ext4MaxDepth || level > ext4MaxDepth || 12+entries*12 > len(b) {
		return errors.New("implausible extent tree")
	}
	for i := 0; i < entries; i++ {
		x := b[12+i*12 : 24+i*12]
		if depth == 0 {
			n := int64(le.Uint16(x[4:]))
			unwritten := n > 32768
			if unwritten {
				n -= 32768
			}
			phys := (int64(le.Uint16(x[6:]))<<32 | int64(le.Uint32(x[8:]))) * e.blockSize
			if phys+n*e.blockSize > e.volumeSize {
				return errors.New("extent beyond the volume")
			}
			if len(*out) >= ext4MaxExtents {
				return errors.New("too many extents")
			}
			*out = append(*out, ext4Extent{logical: int64(le.Uint32(x)) * e.blockSize, physical: phys,
				length: n * e.blockSize, unwritten: unwritten})
			continue
		}
		child := (int64(le.Uint16(x[8:]))<<32 | int64(le.Uint32(x[4:]))) * e.blockSize
		if child+e.blockSize > e.volumeSize {
			return errors.New("extent index beyond the volume")
		}
		node := make([]byte, e.blockSize)
		if _, err := e.r.ReadAt(node, child); err != nil {
			return err
		}
		if err := e.walk(node, level+1, out); err != nil {
			return err
		}
	}
	return nil
}

// ext4FileReader reads a file's logical bytes: extents where they are,
// zeros elsewhere.
type ext4FileReader struct {
	e       *ext4Extents
	extents []ext4Extent
}

func (f *ext4FileReader) ReadAt(p []byte, off int64) (int, error) {
	clear(p)
	end := off + int64(len(p))
	i := sort.Search(len(f.extents), func(i int) bool { return f.extents[i].logical+f.extents[i].length > off })
	for ; i < len(f.extents) && f.extents[i].logical < end; i++ {
		x := f.extents[i]
		if x.unwritten {
			continue
		}
		from, to := max(off, x.logical), min(end, x.logical+x.length)
		if _, err := f.e.r.ReadAt(p[from-off:to-off], x.physical+(from-x.logical)); err != nil && err != io.EOF {
			return 0, err
		}
	}
	return len(p), nil
}
