package nbd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
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
	f.Add(request28(cmdRead, 0, 1<<63-1, 4096), true) // offset + length wraps
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

// replyChunk is one structured reply chunk for the client's first request
// (cookie 1).
func replyChunk(flags, typ uint16, payload []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, magicStructure)
	b = binary.BigEndian.AppendUint16(b, flags)
	b = binary.BigEndian.AppendUint16(b, typ)
	b = binary.BigEndian.AppendUint64(b, 1)
	b = binary.BigEndian.AppendUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

// dataPayload is an OFFSET_DATA payload of n bytes at off, byte i being
// byte(off+i).
func dataPayload(off int64, n int) []byte {
	p := binary.BigEndian.AppendUint64(nil, uint64(off))
	for i := range n {
		p = append(p, byte(off+int64(i)))
	}
	return p
}

// transmitting is a client past the handshake (structured replies,
// base:allocation as context 1) whose server sends reply and then hangs up.
func transmitting(reply []byte) *Conn {
	a, b := net.Pipe()
	go func() {
		go io.Copy(io.Discard, b)
		b.Write(reply)
		b.Close()
	}()
	return &Conn{conn: a, br: bufio.NewReader(a), size: 1 << 20, structed: true, maxBlock: 1 << 20,
		contexts: map[string]uint32{ContextAllocation: 1}}
}

// Small requests keep the seeds small: the fuzzer minimises every new
// input by re-running it without each byte in turn.
const replyOff, replySize = 4096, 1024

func replySeeds() map[string][]byte {
	hole := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint64(nil, replyOff+512), 512)
	return map[string][]byte{
		"one-data-chunk":      replyChunk(chunkFlagDone, chunkOffsetData, dataPayload(replyOff, replySize)),
		"data-then-hole":      append(replyChunk(0, chunkOffsetData, dataPayload(replyOff, 512)), replyChunk(chunkFlagDone, chunkOffsetHole, hole)...),
		"past-the-end":        replyChunk(chunkFlagDone, chunkOffsetData, dataPayload(replyOff+replySize-8, 16)),
		"before-the-start":    replyChunk(chunkFlagDone, chunkOffsetData, dataPayload(replyOff-8, 16)),
		"shorter-than-offset": replyChunk(chunkFlagDone, chunkOffsetData, []byte{1, 2, 3}),
		"truncated":           replyChunk(chunkFlagDone, chunkOffsetData, dataPayload(replyOff, replySize))[:500],
		"offset-wraps":        replyChunk(chunkFlagDone, chunkOffsetData, dataPayload(-1<<63+8, 16)),
		"error-chunk":         replyChunk(chunkFlagDone, chunkError, []byte{0, 0, 0, 5, 0, 2, 'n', 'o'}),
	}
}

// Read replies land in the caller's buffer where their offsets say, and a
// chunk outside the request, a short or a truncated one breaks the
// connection instead of writing anywhere.
func TestClientReadReplies(t *testing.T) {
	want := dataPayload(replyOff, replySize)[8:]
	wantHole := append(append([]byte{}, want[:512]...), make([]byte, 512)...)
	for name, reply := range replySeeds() {
		t.Run(name, func(t *testing.T) {
			c := transmitting(reply)
			defer c.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			buf := make([]byte, replySize)
			_, err := c.ReadAtContext(ctx, buf, replyOff)
			switch name {
			case "one-data-chunk":
				if err != nil || !bytes.Equal(buf, want) {
					t.Fatalf("err %v, data equal %v", err, bytes.Equal(buf, want))
				}
			case "data-then-hole":
				if err != nil || !bytes.Equal(buf, wantHole) {
					t.Fatalf("err %v, data equal %v", err, bytes.Equal(buf, wantHole))
				}
			case "error-chunk":
				var e *Error
				if !errors.As(err, &e) || e.Errno != 5 || e.Msg != "no" {
					t.Fatalf("error chunk: %v", err)
				}
			default:
				if !errors.Is(err, ErrBroken) {
					t.Fatalf("malformed reply: %v, want ErrBroken", err)
				}
			}
		})
	}
}

// FuzzClientReplies feeds arbitrary server bytes to a client in the
// transmission phase, answering a read and then a block status request:
// whatever arrives, the client must neither panic nor hang.
func FuzzClientReplies(f *testing.F) {
	for _, r := range replySeeds() {
		f.Add(r)
	}
	f.Add(replyChunk(chunkFlagDone, chunkBlockStatus, []byte{0, 0, 0, 1, 0, 0, 16, 0, 0, 0, 0, 0}))
	f.Fuzz(func(t *testing.T, reply []byte) {
		c := transmitting(reply)
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		done := make(chan struct{})
		go func() {
			defer close(done)
			c.ReadAtContext(ctx, make([]byte, replySize), replyOff)
			c.BlockStatus(ctx, ContextAllocation, replyOff, replySize)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("client hung on a malformed reply")
		}
	})
}
