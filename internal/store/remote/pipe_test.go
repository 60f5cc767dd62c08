package remote

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"testing"
)

// The buffered pipe hands over every byte in order across its blocks,
// whatever the sizes of the writes and reads, and ends with io.EOF.
func TestBufPipeKeepsOrder(t *testing.T) {
	data := make([]byte, 3*pipeBytes+12345)
	_, _ = rand.Read(data)
	p := newBufPipe()
	go func() {
		for b := data; len(b) > 0; {
			n := min(len(b), 100003)
			if _, err := p.Write(b[:n]); err != nil {
				p.CloseWrite(err)
				return
			}
			b = b[n:]
		}
		p.CloseWrite(nil)
	}()
	got, err := io.ReadAll(io.LimitReader(p, int64(len(data))+1))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read %d of %d bytes, equal %v, %v", len(got), len(data), bytes.Equal(got, data), err)
	}
}

// An abort reaches the reader at once, queued bytes or not (the request
// is cut, so the server stores nothing); a reader that stops (the
// server answered early) fails the writer, even one waiting for room.
func TestBufPipeEnds(t *testing.T) {
	p := newBufPipe()
	if _, err := p.Write([]byte("queued")); err != nil {
		t.Fatal(err)
	}
	p.CloseWrite(errAborted)
	if n, err := p.Read(make([]byte, 10)); n != 0 || !errors.Is(err, errAborted) {
		t.Fatalf("read after an abort: %d bytes, %v", n, err)
	}

	p = newBufPipe()
	done := make(chan error, 1)
	go func() {
		_, err := p.Write(make([]byte, 2*pipeBytes)) // more than the room: waits
		done <- err
	}()
	if _, err := io.ReadFull(p, make([]byte, pipeBlock)); err != nil {
		t.Fatal(err)
	}
	p.CloseRead(errAborted)
	if err := <-done; !errors.Is(err, errAborted) {
		t.Fatalf("write after the reader stopped: %v", err)
	}
}
