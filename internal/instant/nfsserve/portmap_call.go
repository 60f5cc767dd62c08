package nfsserve

import (
	"encoding/binary"
	"errors"
)

// RPC (RFC 5531) message constants the portmapper's replies use.
const (
	rpcVersion     = 2
	msgCall        = 0
	msgReply       = 1
	replyAccepted  = 0
	replyDenied    = 1
	rpcMismatch    = 0
	acceptSuccess  = 0
	acceptProgUnav = 1
	acceptProgMis  = 2
	acceptProcUnav = 3
	acceptGarbage  = 4
)

// errNotCall is a message that is not an RPC call: it gets no reply.
var errNotCall = errors.New("portmapper: not an RPC call")

// answer is the reply to one call message, or errNotCall.
func (p *Portmap) answer(msg []byte) ([]byte, error) {
	r := &xdrWalk{b: msg}
	xid, mtype := r.u32(), r.u32()
	rpcvers, prog, vers, proc := r.u32(), r.u32(), r.u32(), r.u32()
	for range 2 { // credentials and verifier
		r.u32()
		r.opaque("auth body", maxAuthBody)
	}
	if r.err != nil || mtype != msgCall {
		return nil, errNotCall
	}
	out := binary.BigEndian.AppendUint32(nil, xid)
	out = binary.BigEndian.AppendUint32(out, msgReply)
	if rpcvers != rpcVersion {
		return words(out, replyDenied, rpcMismatch, rpcVersion, rpcVersion), nil
	}
	out = words(out, replyAccepted, 0, 0) // AUTH_NULL verifier
	switch {
	case prog != pmapProg:
		return words(out, acceptProgUnav), nil
	case vers != pmapVers: // rpcbind's versions 3 and 4: clients fall back to 2
		return words(out, acceptProgMis, pmapVers, pmapVers), nil
	}
	switch proc {
	case procNull:
		return words(out, acceptSuccess), nil
	case procSet, procUnset:
		return words(out, acceptSuccess, 0), nil // false: nothing registers here
	case procGetport:
		want := mapping{r.u32(), r.u32(), r.u32(), r.u32()}
		if r.err != nil {
			return words(out, acceptGarbage), nil
		}
		return words(out, acceptSuccess, p.port(want)), nil
	case procDump:
		out = words(out, acceptSuccess)
		for _, m := range p.table {
			out = words(out, 1, m.prog, m.vers, m.proto, m.port)
		}
		return words(out, 0), nil
	}
	return words(out, acceptProcUnav), nil
}

// port is where the program, version and protocol asked for listen; 0
// when they are not served.
func (p *Portmap) port(want mapping) uint32 {
	for _, m := range p.table {
		if m.prog == want.prog && m.vers == want.vers && m.proto == want.proto {
			return m.port
		}
	}
	return 0
}

func words(out []byte, ws ...uint32) []byte {
	for _, w := range ws {
		out = binary.BigEndian.AppendUint32(out, w)
	}
	return out
}
