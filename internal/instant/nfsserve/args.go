package nfsserve

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// go-nfs (and the XDR decoders under it) allocates the length that a
// request's opaque or string field claims before it reads the bytes: a
// record of 100 bytes that claims a 2 GiB file handle costs 2 GiB. So
// every call record is checked here, whole, before go-nfs reads it: each
// variable-length field go-nfs decodes must fit in the record and within
// the protocol's bound for that field. The walk follows go-nfs v0.0.4's
// own decoding, procedure by procedure (not RFC 1813 where they differ:
// go-nfs reads LINK as SYMLINK, and reads handles with
// go-nfs-client's unpadded ReadOpaque); it stops at the last
// variable-length field, since what follows is fixed-size.

const (
	// MaxIO is the largest READ or WRITE payload coffer serves in one
	// call: the largest the Linux NFS client uses. A READ asking for more
	// is answered with MaxIO bytes (a short read, which NFS allows).
	MaxIO = 1 << 20
	// maxRecord is the largest call record accepted: a WRITE of MaxIO
	// and its headers (RPC header and credentials at most 2×400 bytes
	// of auth bodies, a handle, offsets).
	maxRecord = MaxIO + 4096

	minRecord   = 40   // go-nfs's own minimum: the RPC call header
	maxAuthBody = 400  // RFC 5531, opaque_auth
	maxHandle   = 64   // NFS3_FHSIZE
	maxName     = 255  // go-nfs's PATHCONF name_max
	maxPath     = 4096 // a symlink's target
	maxDirPath  = 1024 // MNTPATHLEN
)

const (
	progMount = 100005
	progNFS   = 100003
)

// errBadRecord is a call record coffer will not hand to go-nfs.
var errBadRecord = errors.New("nfs: malformed or oversized call record")

// xdrWalk reads a record's fields in place, and records the first fault.
type xdrWalk struct {
	b   []byte
	off int
	err error
}

func (w *xdrWalk) fail(format string, a ...any) {
	if w.err == nil {
		w.err = fmt.Errorf("%w: "+format, append([]any{errBadRecord}, a...)...)
	}
}

func (w *xdrWalk) u32() uint32 {
	if w.err != nil || len(w.b)-w.off < 4 {
		w.fail("record ends at byte %d", w.off)
		return 0
	}
	v := binary.BigEndian.Uint32(w.b[w.off:])
	w.off += 4
	return v
}

func (w *xdrWalk) skip(n int) {
	if w.err != nil || len(w.b)-w.off < n {
		w.fail("record ends at byte %d", w.off)
		return
	}
	w.off += n
}

// opaque is an XDR variable-length opaque of at most limit bytes,
// padded to four bytes (as go-xdr decodes []byte fields).
func (w *xdrWalk) opaque(what string, limit int) {
	n := w.u32()
	if w.err != nil {
		return
	}
	if n > uint32(limit) {
		w.fail("%s of %d bytes (at most %d)", what, n, limit)
		return
	}
	w.skip(int(n+3) &^ 3)
}

// sattr is go-nfs's ReadSetFileAttributes: fixed fields, but their
// presence moves what follows.
func (w *xdrWalk) sattr() {
	for _, size := range []int{4, 4, 4, 8} { // mode, uid, gid, size
		if w.u32() != 0 {
			w.skip(size)
		}
	}
	for range 2 { // atime, mtime
		if w.u32() == 2 {
			w.skip(8)
		}
	}
}

func (w *xdrWalk) dirOp() {
	w.opaque("file handle", maxHandle)
	w.opaque("file name", maxName)
}

// call is what the guard needs of a checked call.
type callInfo struct {
	xid, prog, proc uint32
	readCount       int // the offset of a READ's count, or 0
}

// checkCall walks one call record (without its record mark).
func checkCall(rec []byte) (c callInfo, err error) {
	w := &xdrWalk{b: rec}
	c.xid = w.u32()
	if t := w.u32(); w.err == nil && t != 0 {
		w.fail("message type %d is not a call", t)
	}
	w.skip(4) // RPC version
	prog := w.u32()
	w.skip(4) // program version: go-nfs dispatches on program and procedure
	proc := w.u32()
	c.prog, c.proc = prog, proc
	for range 2 { // credentials and verifier
		w.skip(4)
		w.opaque("auth body", maxAuthBody)
	}
	switch prog {
	case progMount:
		if proc == 1 || proc == 3 { // MNT, UMNT
			w.opaque("directory path", maxDirPath)
		}
	case progNFS:
		c.readCount = w.nfsArgs(proc)
	}
	return c, w.err
}

// nfsArgs walks an NFSv3 procedure's arguments as go-nfs reads them.
func (w *xdrWalk) nfsArgs(proc uint32) (readCount int) {
	switch proc {
	case 1, 2, 4, 5, 16, 17, 18, 19, 20, 21: // handle first, then fixed fields
		w.opaque("file handle", maxHandle)
	case 3, 8, 9, 11, 12, 13: // LOOKUP CREATE MKDIR MKNOD REMOVE RMDIR
		w.dirOp()
	case 6: // READ: handle, offset, count
		w.opaque("file handle", maxHandle)
		w.skip(8)
		readCount = w.off
		w.skip(4)
	case 7: // WRITE: handle, offset, count, stability, data
		w.opaque("file handle", maxHandle)
		w.skip(16)
		w.opaque("write data", MaxIO)
	case 10, 15: // SYMLINK, and LINK as go-nfs reads it
		w.dirOp()
		w.sattr()
		w.opaque("link target", maxPath)
	case 14: // RENAME
		w.dirOp()
		w.dirOp()
	}
	return readCount
}

// capRead lowers a READ's count to MaxIO in place.
func capRead(rec []byte, at int) {
	if at > 0 && binary.BigEndian.Uint32(rec[at:]) > MaxIO {
		binary.BigEndian.PutUint32(rec[at:], MaxIO)
	}
}
