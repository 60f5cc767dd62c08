package nfsserve

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"testing"

	xdr2 "github.com/rasky/go-xdr/xdr2"
	nfs "github.com/willscott/go-nfs"
	"github.com/willscott/go-nfs-client/nfs/rpc"
)

// goNFSDecode decodes a call's header and arguments the way go-nfs
// v0.0.4 does, with go-xdr's reflection decoder (not checkCall's walk)
// on go-nfs's own types where they are exported and copies of them where
// not, up to the last variable-length field. Every variable length must
// fit in what remains of the record: go-xdr's limited decoder refuses a
// longer one, and go-nfs-client's ReadOpaque (which go-nfs uses for
// handles and paths, unpadded) is checked by hand. It returns the bytes
// the lengths would make go-nfs allocate.
func goNFSDecode(rec []byte) (alloc int, err error) {
	r := bytes.NewReader(rec)
	dec := func(v any) error {
		_, err := xdr2.UnmarshalLimited(r, v, uint(r.Len()))
		return err
	}
	var xid, msgType uint32
	var h rpc.Header
	if err := errors.Join(dec(&xid), dec(&msgType), dec(&h)); err != nil {
		return 0, err
	}
	alloc += 2 * (len(h.Cred.Body) + len(h.Verf.Body)) // go-xdr allocates a []byte twice
	readOpaque := func() error {
		var n uint32
		if err := dec(&n); err != nil {
			return err
		}
		if int64(n) > int64(r.Len()) {
			return fmt.Errorf("ReadOpaque of %d bytes, %d left", n, r.Len())
		}
		alloc += int(n)
		_, err := r.Seek(int64(n+3)&^3, io.SeekCurrent)
		return err
	}
	dirOp := func() error {
		var d nfs.DirOpArg
		err := dec(&d)
		alloc += 2 * (len(d.Handle) + len(d.Filename))
		return err
	}
	structWithHandle := func(v any, data func() int) error {
		err := dec(v)
		alloc += 2 * data()
		return err
	}
	switch {
	case h.Prog == progMount && (h.Proc == 1 || h.Proc == 3):
		return alloc, readOpaque()
	case h.Prog != progNFS:
		return alloc, nil
	}
	switch h.Proc {
	case 1, 2, 4, 5, 18, 19, 20, 21:
		return alloc, readOpaque()
	case 3, 8, 9, 11, 12, 13:
		return alloc, dirOp()
	case 6:
		var a struct {
			Handle []byte
			Offset uint64
			Count  uint32
		}
		return alloc, structWithHandle(&a, func() int { return len(a.Handle) })
	case 7:
		var a struct {
			Handle []byte
			Offset uint64
			Count  uint32
			How    uint32
			Data   []byte
		}
		return alloc, structWithHandle(&a, func() int { return len(a.Handle) + len(a.Data) })
	case 16, 17:
		var a struct{ Handle []byte }
		return alloc, structWithHandle(&a, func() int { return len(a.Handle) })
	case 10, 15:
		if err := dirOp(); err != nil {
			return alloc, err
		}
		if _, err := nfs.ReadSetFileAttributes(r); err != nil {
			return alloc, err
		}
		return alloc, readOpaque()
	case 14:
		return alloc, errors.Join(dirOp(), dirOp())
	}
	return alloc, nil
}

// FuzzCheckCallBoundsWhatGoNFSAllocates: whatever a record holds, if
// checkCall lets it through, go-nfs's own decoding of it finds every
// length within the record, so what it allocates is at most twice the
// record. A READ's count is capped at MaxIO.
func FuzzCheckCallBoundsWhatGoNFSAllocates(f *testing.F) {
	handle := bytes.Repeat([]byte{7}, 16)
	opaque := func(b []byte) []byte {
		out := binary.BigEndian.AppendUint32(nil, uint32(len(b)))
		return append(append(out, b...), make([]byte, (4-len(b)%4)%4)...)
	}
	u32 := func(v ...uint32) (b []byte) {
		for _, x := range v {
			b = binary.BigEndian.AppendUint32(b, x)
		}
		return b
	}
	dirop := append(opaque(handle), opaque([]byte("vm.vmx"))...)
	sattr := u32(1, 0o600, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 5, 6) // mode, size, mtime set
	f.Add(uint32(progNFS), uint32(1), []byte{}, opaque(handle))
	f.Add(uint32(progNFS), uint32(6), []byte{}, append(opaque(handle), u32(0, 0, 1<<30)...))
	f.Add(uint32(progNFS), uint32(7), []byte{}, append(append(opaque(handle), u32(0, 0, 5, 2)...), opaque([]byte("hello"))...))
	f.Add(uint32(progNFS), uint32(10), []byte{1, 2, 3}, append(append(dirop, sattr...), opaque([]byte("target"))...))
	f.Add(uint32(progNFS), uint32(14), []byte{}, append(dirop, dirop...))
	f.Add(uint32(progMount), uint32(1), []byte{}, opaque([]byte("/")))
	f.Add(uint32(progNFS), uint32(3), []byte{}, u32(0x7fffffff))
	f.Fuzz(func(t *testing.T, prog, proc uint32, cred, args []byte) {
		rec := u32(1, 0, 2, prog, 3, proc, 1)
		rec = append(rec, opaque(cred)...)
		rec = append(append(rec, u32(0, 0)...), args...)
		ci, err := checkCall(rec)
		if err != nil {
			if !errors.Is(err, errBadRecord) {
				t.Fatalf("refused without errBadRecord: %v", err)
			}
			return
		}
		alloc, err := goNFSDecode(rec)
		if err != nil {
			t.Fatalf("checkCall let through a record go-nfs cannot decode within it: %v", err)
		}
		if alloc > 2*len(rec) {
			t.Fatalf("go-nfs would allocate %d bytes for a record of %d", alloc, len(rec))
		}
		at := ci.readCount
		capRead(rec, at)
		if at > 0 && binary.BigEndian.Uint32(rec[at:]) > MaxIO {
			t.Fatal("a READ's count is above MaxIO")
		}
	})
}
