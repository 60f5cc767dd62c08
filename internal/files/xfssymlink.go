package files

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/masahiro331/go-xfs-filesystem/xfs"
)

// xfsSymlinks reads the targets of XFS symlinks that do not fit in the
// inode ("remote" symlinks, data fork in extents format). The library
// reads only targets stored in the inode.
//
// On disk (xfs_format.h, xfs_symlink_remote.c): the data fork holds at
// most three extents (XFS_SYMLINK_MAPS) covering the target's blocks. On
// v5 (CRC) filesystems each extent starts with a 56-byte xfs_dsymlink_hdr
// (magic "XSLM", offset of this piece in the target, bytes in this piece,
// CRC32C of the extent's blocks, filesystem UUID, owner inode, disk
// address, LSN) and the piece follows it; v4 extents hold the bare target.
type xfsSymlinks struct {
	r         io.ReaderAt
	size      int64 // of the volume
	blockSize int64
	agBlocks  uint64
	agCount   uint64
	agBlkLog  uint8
	inoPBLog  uint8
	inodeSize int64
	crc       bool
}

const (
	xfsSymlinkMaxLen  = 1024 // XFS_SYMLINK_MAXLEN
	xfsSymlinkMaps    = 3    // XFS_SYMLINK_MAPS
	xfsSymlinkHdrSize = 56
	xfsSymlinkMagic   = 0x58534c4d // "XSLM"
	xfsInodeMagic     = 0x494e     // "IN"
	xfsFormatExtents  = 2
)

func newXFSSymlinks(r io.ReaderAt, size int64, sb xfs.SuperBlock) *xfsSymlinks {
	return &xfsSymlinks{r: r, size: size, blockSize: int64(sb.BlockSize), agBlocks: uint64(sb.Agblocks),
		agCount: uint64(sb.Agcount), agBlkLog: sb.Agblklog, inoPBLog: sb.Inopblog,
		inodeSize: int64(sb.Inodesize), crc: sb.Versionnum&0xf == 5}
}

// blockOffset maps a filesystem block number (AG number, AG block) to a
// byte offset in the volume.
func (s *xfsSymlinks) blockOffset(fsb uint64) (int64, error) {
	ag, agb := fsb>>s.agBlkLog, fsb&(1<<s.agBlkLog-1)
	if ag >= s.agCount || agb >= s.agBlocks {
		return 0, fmt.Errorf("block %d outside the filesystem", fsb)
	}
	return int64(ag*s.agBlocks+agb) * s.blockSize, nil
}

// inodeOffset maps an inode number (AG number, AG block, index in the
// block) to a byte offset in the volume.
func (s *xfsSymlinks) inodeOffset(ino uint64) (int64, error) {
	inoInAG := uint64(s.inoPBLog) + uint64(s.agBlkLog)
	fsb := (ino>>inoInAG)<<s.agBlkLog | (ino>>s.inoPBLog)&(1<<s.agBlkLog-1)
	off, err := s.blockOffset(fsb)
	if err != nil {
		return 0, fmt.Errorf("inode %d: %w", ino, err)
	}
	return off + int64(ino&(1<<s.inoPBLog-1))*s.inodeSize, nil
}

// target reads the target of symlink inode ino.
func (s *xfsSymlinks) target(ino uint64) (string, error) {
	if s.blockSize < 512 || s.inodeSize < 256 || s.inodeSize > s.blockSize {
		return "", errors.New("implausible XFS geometry")
	}
	inodeOff, err := s.inodeOffset(ino)
	if err != nil {
		return "", err
	}
	in := make([]byte, s.inodeSize)
	if _, err := s.r.ReadAt(in, inodeOff); err != nil {
		return "", err
	}
	be := binary.BigEndian
	core := int64(100)
	switch {
	case be.Uint16(in) != xfsInodeMagic || be.Uint16(in[2:])&0xf000 != 0xa000:
		return "", errors.New("not a symlink inode")
	case in[4] == 3:
		if !xfsCRCOK(in, 100) || be.Uint64(in[152:]) != ino {
			return "", errors.New("symlink inode fails its checksum")
		}
		core = 176
	}
	if in[5] != xfsFormatExtents {
		return "", fmt.Errorf("symlink inode in format %d", in[5])
	}
	size, nextents := be.Uint64(in[56:]), int(be.Uint32(in[76:]))
	fork := s.inodeSize - core
	if forkoff := int64(in[82]); forkoff != 0 {
		fork = forkoff * 8
	}
	if size == 0 || size > xfsSymlinkMaxLen || nextents < 1 || nextents > xfsSymlinkMaps || core+fork > s.inodeSize || int64(nextents)*16 > fork {
		return "", fmt.Errorf("implausible symlink inode (size %d, %d extents)", size, nextents)
	}
	target := make([]byte, 0, size)
	for i := 0; i < nextents && uint64(len(target)) < size; i++ {
		rec := in[core+int64(i)*16:]
		l0, l1 := be.Uint64(rec), be.Uint64(rec[8:])
		start, count := (l0&(1<<9-1))<<43|l1>>21, int64(l1&(1<<21-1))
		if l0>>63 != 0 || count == 0 || count*s.blockSize > 2*xfsSymlinkMaxLen+s.blockSize {
			return "", errors.New("implausible symlink extent")
		}
		off, err := s.blockOffset(start)
		if err != nil || off+count*s.blockSize > s.size {
			return "", errors.New("symlink extent outside the volume")
		}
		buf := make([]byte, count*s.blockSize)
		if _, err := s.r.ReadAt(buf, off); err != nil {
			return "", err
		}
		piece, err := s.piece(buf, ino, off, len(target), int(size)-len(target))
		if err != nil {
			return "", err
		}
		target = append(target, piece...)
	}
	if uint64(len(target)) != size {
		return "", fmt.Errorf("symlink blocks hold %d of %d bytes", len(target), size)
	}
	return string(target), nil
}

// piece checks one extent's blocks and returns the part of the target in
// them; done bytes came before, left are still missing.
func (s *xfsSymlinks) piece(buf []byte, ino uint64, off int64, done, left int) ([]byte, error) {
	if !s.crc {
		return buf[:min(len(buf), left)], nil
	}
	be := binary.BigEndian
	n := min(len(buf)-xfsSymlinkHdrSize, left)
	switch {
	case be.Uint32(buf) != xfsSymlinkMagic:
		return nil, errors.New("symlink block lacks its XSLM header")
	case !xfsCRCOK(buf, 12):
		return nil, errors.New("symlink block fails its checksum")
	case be.Uint64(buf[32:]) != ino || be.Uint64(buf[40:]) != uint64(off/512):
		return nil, errors.New("symlink block belongs to another inode or place")
	case int(be.Uint32(buf[4:])) != done || int(be.Uint32(buf[8:])) != n:
		return nil, errors.New("symlink block holds another part of the target")
	}
	return buf[xfsSymlinkHdrSize : xfsSymlinkHdrSize+n], nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// xfsCRCOK checks an XFS metadata checksum: CRC32C of b with the 4 bytes
// at off (where it is stored, little-endian) taken as zero.
func xfsCRCOK(b []byte, off int) bool {
	c := crc32.Update(0, castagnoli, b[:off])
	c = crc32.Update(c, castagnoli, make([]byte, 4))
	c = crc32.Update(c, castagnoli, b[off+4:])
	return c == binary.LittleEndian.Uint32(b[off:])
}
