package nbd

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// clientPreamble is a valid client handshake up to transmission, so the
// fuzzer spends its effort on options and requests.
func clientPreamble() []byte {
	b := binary.BigEndian.AppendUint32(nil, flagFixedNewstyle|flagNoZeroes)
	opt := func(o uint32, data []byte) {
		b = binary.BigEndian.AppendUint64(b, magicIHaveOpt)
		b = binary.BigEndian.AppendUint32(b, o)
		b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
		b = append(b, data...)
	}
	opt(optStructured, nil)
	meta := appendString32(nil, "d")
	meta = binary.BigEndian.AppendUint32(meta, 1)
	meta = appendString32(meta, ContextAllocation)
	opt(optSetMetaContext, meta)
	goData := appendString32(nil, "d")
	opt(optGo, binary.BigEndian.AppendUint16(goData, 0))
	return b
}

func request28(cmd uint16, flags uint16, off int64, n uint32) []byte {
	b := binary.BigEndian.AppendUint32(nil, magicRequest)
	b = binary.BigEndian.AppendUint16(b, flags)
	b = binary.BigEndian.AppendUint16(b, cmd)
	b = binary.BigEndian.AppendUint64(b, 7)
	b = binary.BigEndian.AppendUint64(b, uint64(off))
	return binary.BigEndian.AppendUint32(b, n)
}

// FuzzServer feeds arbitrary client bytes to the server: it must neither
// panic nor hang, whatever arrives.
func FuzzServer(f *testing.F) {
	pre := clientPreamble()
	f.Add([]byte{}, true)
	f.Add(request28(cmdRead, 0, 0, 4096), true)
	f.Add(request28(cmdBlockStatus, cmdFlagReqOne, 4096, 1<<20), true)
	f.Add(request28(cmdWrite, 0, 0, 4), true)
	f.Add(request28(cmdRead, 0, -1, 1<<31), true)
	f.Add(pre[:20], false)
	exp := &memExport{data: make([]byte, 1<<20), alloc: []Extent{{Offset: 4096, Length: 8192}}}
	f.Fuzz(func(t *testing.T, data []byte, withPreamble bool) {
		srv := &Server{Lookup: func(n string) (Export, bool) { return exp, n == "d" }, List: func() []string { return []string{"d"} }}
		a, b := net.Pipe()
		done := make(chan struct{})
		go func() {
			defer close(done)
			srv.serveConn(context.Background(), a)
			a.Close()
		}()
		go io.Copy(io.Discard, b)
		in := data
		if withPreamble {
			in = append(append([]byte{}, pre...), data...)
		}
		b.SetWriteDeadline(time.Now().Add(2 * time.Second))
		b.Write(in)
		b.Close()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("server hung on malformed input")
		}
	})
}

// FuzzClientHandshake feeds arbitrary server bytes to the client handshake.
func FuzzClientHandshake(f *testing.F) {
	good := binary.BigEndian.AppendUint64(nil, magicNBD)
	good = binary.BigEndian.AppendUint64(good, magicIHaveOpt)
	good = binary.BigEndian.AppendUint16(good, flagFixedNewstyle|flagNoZeroes)
	f.Add(good)
	f.Add(append(good, 0, 0, 0, 0))
	f.Fuzz(func(t *testing.T, data []byte) {
		a, b := net.Pipe()
		go func() {
			go io.Copy(io.Discard, b)
			b.Write(data)
			b.Close()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if c, err := NewConn(ctx, a, ClientOptions{Export: "d", MetaContexts: []string{ContextAllocation}}); err == nil {
			buf := make([]byte, 512)
			c.ReadAtContext(ctx, buf, 0)
			c.Close()
		}
	})
}
