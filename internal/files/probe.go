package files

import (
	"bytes"
	"encoding/binary"
	"io"
)

// Filesystem types recognised by probe.
const (
	TypeExt4    = "ext4"
	TypeXFS     = "xfs"
	TypeFAT     = "vfat"
	TypeNTFS    = "ntfs"
	TypeLVM     = "lvm2-pv"
	TypeUnknown = "unknown"
)

// probe identifies the filesystem at the start of r by its signature.
func probe(r io.ReaderAt, size int64) string {
	buf := make([]byte, 4096)
	n, _ := r.ReadAt(buf, 0)
	buf = buf[:n]
	switch {
	case len(buf) >= 1082 && binary.LittleEndian.Uint16(buf[1080:]) == 0xEF53:
		return TypeExt4
	case len(buf) >= 4 && string(buf[:4]) == "XFSB":
		return TypeXFS
	case len(buf) >= 11 && string(buf[3:11]) == "NTFS    ":
		return TypeNTFS
	case len(buf) >= 90 && string(buf[82:87]) == "FAT32" && buf[510] == 0x55 && buf[511] == 0xAA:
		return TypeFAT
	case len(buf) >= 1024 && isLVMLabel(buf):
		return TypeLVM
	}
	return TypeUnknown
}

// isLVMLabel finds an LVM2 label ("LABELONE" ... "LVM2 001") in the first
// four sectors.
func isLVMLabel(b []byte) bool {
	for s := 0; s+32 <= len(b) && s < 2048; s += 512 {
		if string(b[s:s+8]) == "LABELONE" && bytes.Equal(b[s+24:s+32], []byte("LVM2 001")) {
			return true
		}
	}
	return false
}
