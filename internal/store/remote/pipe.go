package remote

import (
	"io"
	"sync"
)

// A PUT's body flows from the object writer to the HTTP transport through
// a bufPipe: an io.Pipe with up to pipeBytes of room. Through io.Pipe each
// Write waited until the transport had sent it over TLS, and the pack
// writer calling it holds its stream's lock, so every other worker of the
// backup waited too (the client's block profile: most of the backup's
// lock waits were Stream.Add behind a write to the server). With room,
// a Write is a copy, and the transport sends while the workers go on,
// as the local store's O_DIRECT sink writes one block while the next fills.
const (
	pipeBlock = 256 << 10
	pipeBytes = 4 << 20
)

// freePipeBlocks recycles blocks across writers: a pack is 16 MiB, so a
// backup would otherwise allocate (and zero) every byte it sends.
var freePipeBlocks = make(chan []byte, 2*pipeBytes/pipeBlock)

type bufPipe struct {
	mu     sync.Mutex
	cond   sync.Cond
	blocks [][]byte // queued bytes; blocks[0][head:] is read next
	head   int
	queued int
	werr   error // the writer's end: io.EOF once closed, or its error
	rerr   error // the reader's end: the error writes now get
}

func newBufPipe() *bufPipe {
	p := &bufPipe{}
	p.cond.L = &p.mu
	return p
}

// Write copies b into the pipe, waiting only while it is full.
func (p *bufPipe) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for len(b) > 0 {
		switch {
		case p.rerr != nil:
			return n, p.rerr
		case p.werr != nil:
			return n, io.ErrClosedPipe
		case p.queued >= pipeBytes:
			p.cond.Wait()
			continue
		}
		last := len(p.blocks) - 1
		if last < 0 || len(p.blocks[last]) == cap(p.blocks[last]) {
			p.blocks = append(p.blocks, getPipeBlock())
			last++
		}
		blk := p.blocks[last]
		k := copy(blk[len(blk):cap(blk)], b)
		p.blocks[last] = blk[:len(blk)+k]
		b, n, p.queued = b[k:], n+k, p.queued+k
		p.cond.Broadcast()
	}
	return n, nil
}

// Read takes what was written, in order; then the writer's end.
func (p *bufPipe) Read(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.queued == 0 {
		if p.rerr != nil {
			return 0, io.ErrClosedPipe
		}
		if p.werr != nil {
			return 0, p.werr
		}
		p.cond.Wait()
	}
	k := copy(b, p.blocks[0][p.head:])
	p.head += k
	p.queued -= k
	if p.head == len(p.blocks[0]) {
		putPipeBlock(p.blocks[0])
		p.blocks, p.head = p.blocks[1:], 0
	}
	p.cond.Broadcast()
	return k, nil
}

// CloseWrite ends the body: with nil, the reader gets io.EOF after what
// is queued; with an error (an abort), it gets the error at once.
func (p *bufPipe) CloseWrite(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.werr != nil {
		return
	}
	if err == nil {
		err = io.EOF
	} else {
		p.drop()
	}
	p.werr = err
	p.cond.Broadcast()
}

// CloseRead stops the reader (the request ended): writes get err.
func (p *bufPipe) CloseRead(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rerr == nil {
		p.rerr = err
	}
	p.drop()
	p.cond.Broadcast()
}

// Close is the transport's: it is done with the body.
func (p *bufPipe) Close() error {
	p.CloseRead(io.ErrClosedPipe)
	return nil
}

func (p *bufPipe) drop() {
	for _, b := range p.blocks {
		putPipeBlock(b)
	}
	p.blocks, p.head, p.queued = nil, 0, 0
}

func getPipeBlock() []byte {
	select {
	case b := <-freePipeBlocks:
		return b[:0]
	default:
		return make([]byte, 0, pipeBlock)
	}
}

func putPipeBlock(b []byte) {
	select {
	case freePipeBlocks <- b:
	default:
	}
}
