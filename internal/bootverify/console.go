package bootverify

import (
	"net"
	"regexp"
	"sync"
)

// console collects the first serial port, which QEMU writes to coffer's
// socket, and tells waiters when it changes.
type console struct {
	l       net.Listener
	mu      sync.Mutex
	buf     []byte
	changed chan struct{}
}

// consoleKeep bounds the console held in memory: the marker is searched
// in what arrived last.
const consoleKeep = 256 << 10

func listenConsole(path string) (*console, error) {
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	c := &console{l: l, changed: make(chan struct{})}
	go c.accept()
	return c, nil
}

func (c *console) accept() {
	conn, err := c.l.Accept()
	if err != nil {
		return
	}
	defer conn.Close()
	b := make([]byte, 4096)
	for {
		n, err := conn.Read(b)
		if n > 0 {
			c.mu.Lock()
			c.buf = append(c.buf, b[:n]...)
			if len(c.buf) > consoleKeep {
				c.buf = append([]byte(nil), c.buf[len(c.buf)-consoleKeep/2:]...)
			}
			close(c.changed)
			c.changed = make(chan struct{})
			c.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// match returns the console's first match of re so far, and a channel
// closed when more arrives.
func (c *console) match(re *regexp.Regexp) (string, <-chan struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(re.Find(c.buf)), c.changed
}

func (c *console) tail(n int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return tail(string(c.buf), n)
}

func (c *console) close() { c.l.Close() }
