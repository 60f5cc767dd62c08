// Package qmp is a client for the QEMU Machine Protocol: JSON commands and
// replies over a unix socket, correlated by id, with asynchronous events.
//
// Hand-written because the one Go QMP library (digitalocean/go-qemu) is not
// available here, and the protocol subset coffer needs is small: greeting,
// qmp_capabilities, execute with id, events.
//
// One monitor socket serves one client at a time, so coffer expects a
// dedicated monitor on every VM it protects (see docs/03-hypervisors.md).
package qmp

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Error is an error reply from QEMU.
type Error struct {
	Command string
	Class   string `json:"class"`
	Desc    string `json:"desc"`
}

func (e *Error) Error() string { return fmt.Sprintf("qmp %s: %s: %s", e.Command, e.Class, e.Desc) }

// ErrClosed is returned for commands on a closed or broken connection.
var ErrClosed = errors.New("qmp: connection closed")

// Event is an asynchronous notification from QEMU.
type Event struct {
	Name string          `json:"event"`
	Data json.RawMessage `json:"data"`
	Time time.Time       `json:"-"`
}

type message struct {
	QMP       json.RawMessage `json:"QMP"`
	Return    json.RawMessage `json:"return"`
	Error     *Error          `json:"error"`
	Event     string          `json:"event"`
	Data      json.RawMessage `json:"data"`
	ID        json.RawMessage `json:"id"`
	Timestamp struct {
		Seconds      int64 `json:"seconds"`
		Microseconds int64 `json:"microseconds"`
	} `json:"timestamp"`
}

// Client is one QMP connection. Safe for concurrent use.
type Client struct {
	conn    net.Conn
	version string

	writeMu sync.Mutex
	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan message
	subs    map[int]chan Event
	nextSub int
	err     error
	done    chan struct{}
}

// Dial connects to a QMP unix socket and negotiates capabilities. QEMU only
// greets one client per monitor, so a busy monitor shows up as a timeout
// bounded by ctx.
func Dial(ctx context.Context, path string) (*Client, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("qmp: connect %s: %w", path, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetReadDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetReadDeadline(time.Unix(1, 0)) })
	br := bufio.NewReaderSize(conn, 64<<10)
	line, err := br.ReadBytes('\n')
	stop()
	if err != nil {
		conn.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("qmp: %s sent no greeting (is another client connected to this monitor?): %w", path, ctx.Err())
		}
		return nil, fmt.Errorf("qmp: greeting from %s: %w", path, err)
	}
	conn.SetReadDeadline(time.Time{})
	var greet struct {
		QMP struct {
			Version struct {
				QEMU struct{ Major, Minor, Micro int } `json:"qemu"`
			} `json:"version"`
		} `json:"QMP"`
	}
	if err := json.Unmarshal(line, &greet); err != nil {
		conn.Close()
		return nil, fmt.Errorf("qmp: %s: not a QMP monitor (%.60q)", path, line)
	}
	v := greet.QMP.Version.QEMU
	c := &Client{
		conn: conn, version: fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Micro),
		pending: map[uint64]chan message{}, subs: map[int]chan Event{}, done: make(chan struct{}),
	}
	go c.readLoop(br)
	if err := c.Execute(ctx, "qmp_capabilities", nil, nil); err != nil {
		_ = c.Close() // best effort after the error returned
		return nil, err
	}
	return c, nil
}

// Version is QEMU's version from the greeting ("7.2.22").
func (c *Client) Version() string { return c.version }

// Close closes the connection; pending commands fail with ErrClosed.
func (c *Client) Close() error { return c.conn.Close() }

// Done is closed when the connection is gone.
func (c *Client) Done() <-chan struct{} { return c.done }

func (c *Client) readLoop(br *bufio.Reader) {
	var err error
	for {
		var line []byte
		line, err = br.ReadBytes('\n')
		if err != nil {
			break
		}
		var m message
		if json.Unmarshal(line, &m) != nil {
			continue // QEMU never sends malformed JSON; skip rather than die
		}
		if m.Event != "" {
			ev := Event{Name: m.Event, Data: m.Data,
				Time: time.Unix(m.Timestamp.Seconds, m.Timestamp.Microseconds*1000)}
			c.mu.Lock()
			for _, ch := range c.subs {
				select {
				case ch <- ev:
				default: // a subscriber that does not drain loses events, never blocks the reader
				}
			}
			c.mu.Unlock()
			continue
		}
		id, perr := strconv.ParseUint(string(m.ID), 10, 64)
		if perr != nil {
			continue
		}
		c.mu.Lock()
		ch := c.pending[id]
		delete(c.pending, id)
		c.mu.Unlock()
		if ch != nil {
			ch <- m
		}
	}
	c.mu.Lock()
	c.err = fmt.Errorf("%w: %v", ErrClosed, err)
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
	for k, ch := range c.subs {
		close(ch)
		delete(c.subs, k)
	}
	c.mu.Unlock()
	close(c.done)
}

// Execute runs a command; args is marshalled as "arguments" and the
// "return" value is unmarshalled into result (both may be nil).
func (c *Client) Execute(ctx context.Context, command string, args, result any) error {
	req := map[string]any{"execute": command}
	if args != nil {
		req["arguments"] = args
	}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.nextID++
	id := c.nextID
	ch := make(chan message, 1)
	c.pending[id] = ch
	c.mu.Unlock()
	req["id"] = id
	b, err := json.Marshal(req)
	if err != nil {
		return err
	}
	c.writeMu.Lock()
	_, err = c.conn.Write(append(b, '\n'))
	c.writeMu.Unlock()
	if err != nil {
		return fmt.Errorf("qmp %s: %w", command, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return fmt.Errorf("qmp %s: %w", command, ErrClosed)
		}
		if m.Error != nil {
			m.Error.Command = command
			return m.Error
		}
		if result != nil && len(m.Return) > 0 {
			if err := json.Unmarshal(m.Return, result); err != nil {
				return fmt.Errorf("qmp %s: decode reply: %w", command, err)
			}
		}
		return nil
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return fmt.Errorf("qmp %s: %w", command, ctx.Err())
	}
}

// Subscription receives events until Cancel.
type Subscription struct {
	C      <-chan Event
	c      *Client
	key    int
	closed bool
}

// Subscribe starts buffering events. Subscribe before issuing the command
// whose event you wait for, so it cannot be missed.
func (c *Client) Subscribe() *Subscription {
	ch := make(chan Event, 256)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		close(ch)
		return &Subscription{C: ch, c: c, closed: true}
	}
	c.nextSub++
	c.subs[c.nextSub] = ch
	return &Subscription{C: ch, c: c, key: c.nextSub}
}

// Cancel stops the subscription.
func (s *Subscription) Cancel() {
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if ch, ok := s.c.subs[s.key]; ok && !s.closed {
		delete(s.c.subs, s.key)
		close(ch)
	}
	s.closed = true
}

// Wait returns the first event named name ("" for any name) for which
// match (may be nil) returns true.
func (s *Subscription) Wait(ctx context.Context, name string, match func(json.RawMessage) bool) (Event, error) {
	for {
		select {
		case ev, ok := <-s.C:
			if !ok {
				return Event{}, fmt.Errorf("waiting for %s: %w", name, ErrClosed)
			}
			if (name == "" || ev.Name == name) && (match == nil || match(ev.Data)) {
				return ev, nil
			}
		case <-ctx.Done():
			return Event{}, fmt.Errorf("waiting for %s: %w", name, ctx.Err())
		}
	}
}

// FieldIs matches event data whose string field key equals value.
func FieldIs(key, value string) func(json.RawMessage) bool {
	return func(d json.RawMessage) bool {
		var m map[string]any
		if json.Unmarshal(d, &m) != nil {
			return false
		}
		s, _ := m[key].(string)
		return s == value
	}
}

// IsClass reports whether err is a QMP error of the given class
// ("GenericError", "DeviceNotFound", ...).
func IsClass(err error, class string) bool {
	var e *Error
	return errors.As(err, &e) && e.Class == class
}

// PeerPID is the process id of the QEMU at the other end of the socket
// (SO_PEERCRED), or 0 if unknown.
func (c *Client) PeerPID() int {
	uc, ok := c.conn.(*net.UnixConn)
	if !ok {
		return 0
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0
	}
	pid := 0
	_ = raw.Control(func(fd uintptr) { // on failure pid stays 0: unknown
		if cred, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED); err == nil {
			pid = int(cred.Pid)
		}
	})
	return pid
}
