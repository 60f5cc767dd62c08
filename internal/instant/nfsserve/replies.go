package nfsserve

import (
	"encoding/binary"
	"sync"
)

// procFSInfo is NFSv3's FSINFO.
const procFSInfo = 19

// replies follows the records go-nfs writes on a connection and lowers
// the transfer sizes in its FSINFO replies to MaxIO: go-nfs advertises
// 1 GiB for reads and writes, and a client that took it at its word would
// send WRITEs the guard refuses. go-nfs writes each reply as one record
// (mark and message) through a buffered writer that it flushes after each,
// so a reply starts a Write; a mark split over two Writes ends the
// patching for the connection rather than risk a wrong byte.
type replies struct {
	mu     sync.Mutex
	fsinfo map[uint32]bool // xids of FSINFO calls not yet answered
	left   int             // bytes of the current record still to come
	lost   bool
}

// expect notes an FSINFO call's xid (a client has a few in flight at
// most; more are not patched).
func (r *replies) expect(xid uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fsinfo == nil {
		r.fsinfo = map[uint32]bool{}
	}
	if len(r.fsinfo) < 16 {
		r.fsinfo[xid] = true
	}
}

// patch walks the records in p, the next bytes written.
func (r *replies) patch(p []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for off := 0; off < len(p) && !r.lost; {
		if r.left == 0 {
			if len(p)-off < 4 {
				r.lost = true
				return
			}
			n := int(binary.BigEndian.Uint32(p[off:]) &^ (1 << 31))
			r.fsinfoReply(p[off+4 : min(len(p), off+4+n)])
			r.left = 4 + n
		}
		k := min(r.left, len(p)-off)
		off += k
		r.left -= k
	}
}

// fsinfoReply lowers rtmax, rtpref, wtmax and wtpref of an accepted,
// successful FSINFO reply in b (RFC 1813, FSINFO3resok) to MaxIO.
func (r *replies) fsinfoReply(b []byte) {
	if len(b) < 4 || !r.fsinfo[binary.BigEndian.Uint32(b)] {
		return
	}
	delete(r.fsinfo, binary.BigEndian.Uint32(b))
	w := &xdrWalk{b: b}
	w.skip(4) // xid
	msgType, replyStat := w.u32(), w.u32()
	if msgType != 1 || replyStat != 0 { // a reply, accepted
		return
	}
	w.skip(4)                 // verifier's flavor
	w.opaque("verifier", 400) // and body
	acceptStat, status := w.u32(), w.u32()
	if acceptStat != 0 || status != 0 { // SUCCESS, NFS3_OK
		return
	}
	if w.u32() != 0 {
		w.skip(84) // fattr3
	}
	at := w.off
	w.skip(28) // rtmax rtpref rtmult wtmax wtpref wtmult dtpref
	if w.err != nil {
		return
	}
	for _, field := range []int{0, 4, 12, 16} {
		if binary.BigEndian.Uint32(b[at+field:]) > MaxIO {
			binary.BigEndian.PutUint32(b[at+field:], MaxIO)
		}
	}
}
