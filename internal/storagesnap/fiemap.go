package storagesnap

import (
	"fmt"
	"os"
	"sort"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FIEMAP (FS_IOC_FIEMAP) tells where on the device each extent of a file
// lies. Two reflink clones (or two btrfs snapshots) of one file share the
// physical extents nobody wrote between them, so comparing their maps
// says which ranges changed without reading a byte. golang.org/x/sys has
// no wrapper for this ioctl, hence the few lines of hand-written layout.

const (
	fsIocFiemap    = 0xC020660B // _IOWR('f', 11, struct fiemap)
	fiemapFlagSync = 0x1        // flush dirty data first: no delayed allocations left
	fiemapBatch    = 512        // extents asked for per call

	fiemapExtentLast = 0x1
	// Flags under which the physical address does not identify the data
	// (unknown, delayed allocation, encoded, encrypted, unaligned, inline
	// or tail-packed): such extents count as changed.
	fiemapExtentUntrusted = 0x2 | 0x4 | 0x8 | 0x80 | 0x100 | 0x200 | 0x400
)

type fiemapHeader struct {
	start, length                      uint64
	flags, mapped, count, reservedHead uint32
}

type fiemapExtent struct {
	logical, physical, length uint64
	reserved64                [2]uint64
	flags                     uint32
	reserved                  [3]uint32
}

// physExtent is one extent of a file: bytes [logical, logical+length)
// are at physical on the device; trusted is false when the address does
// not identify the data.
type physExtent struct {
	logical, physical, length int64
	trusted                   bool
}

// fileExtents returns the extents of a file in logical order.
func fileExtents(path string) ([]physExtent, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }() // read only
	buf := make([]byte, int(unsafe.Sizeof(fiemapHeader{}))+fiemapBatch*int(unsafe.Sizeof(fiemapExtent{})))
	hdr := (*fiemapHeader)(unsafe.Pointer(&buf[0]))
	exts := unsafe.Slice((*fiemapExtent)(unsafe.Pointer(&buf[unsafe.Sizeof(fiemapHeader{})])), fiemapBatch)
	var out []physExtent
	var next uint64
	for {
		*hdr = fiemapHeader{start: next, length: ^uint64(0) - next, flags: fiemapFlagSync, count: fiemapBatch}
		if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), fsIocFiemap, uintptr(unsafe.Pointer(&buf[0]))); e != 0 {
			return nil, fmt.Errorf("FIEMAP %s: %w", path, e)
		}
		if hdr.mapped == 0 {
			return out, nil
		}
		for _, e := range exts[:hdr.mapped] {
			out = append(out, physExtent{logical: int64(e.logical), physical: int64(e.physical), length: int64(e.length),
				trusted: e.flags&fiemapExtentUntrusted == 0})
			if e.flags&fiemapExtentLast != 0 {
				return out, nil
			}
			next = e.logical + e.length
		}
	}
}

// physRun is a piece of a file range as the device holds it: physical
// -1 is a hole (reads as zeros), -2 an address that does not identify
// the data.
type physRun struct {
	physical, length int64
}

// runs describes the file range [off, off+n) as the device holds it.
func runs(exts []physExtent, off, n int64) []physRun {
	var out []physRun
	i := sort.Search(len(exts), func(i int) bool { return exts[i].logical+exts[i].length > off })
	for end := off + n; off < end; {
		if i >= len(exts) || exts[i].logical >= end {
			return append(out, physRun{-1, end - off})
		}
		e := exts[i]
		if e.logical > off {
			out = append(out, physRun{-1, e.logical - off})
			off = e.logical
			continue
		}
		l := min(e.logical+e.length, end) - off
		p := e.physical + off - e.logical
		if !e.trusted {
			p = -2
		}
		out = append(out, physRun{p, l})
		off += l
		i++
	}
	return out
}

// sameRuns reports whether two file ranges are held by the same device
// blocks (or are holes in both): then their data is the same.
func sameRuns(a, b []physRun) bool {
	a, b = mergeRuns(a), mergeRuns(b)
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] || a[i].physical == -2 {
			return false
		}
	}
	return true
}

// mergeRuns joins runs that continue each other on the device, so that
// one range split into extents differently in two files compares equal.
func mergeRuns(rs []physRun) []physRun {
	var out []physRun
	for _, r := range rs {
		if n := len(out); n > 0 {
			last := &out[n-1]
			if (last.physical == -1 && r.physical == -1) || (last.physical >= 0 && r.physical == last.physical+last.length) {
				last.length += r.length
				continue
			}
		}
		out = append(out, r)
	}
	return out
}
