package qmp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"time"
)

// GuestAgent talks to qemu-guest-agent through the VM's virtio-serial
// chardev socket. The protocol is QMP-like without greeting or ids; after a
// (re)connect stale replies may still be in flight, so every session starts
// with the 0xFF + guest-sync-delimited resynchronisation.
type GuestAgent struct {
	conn net.Conn
	br   *bufio.Reader
}

// DialGuestAgent connects and synchronises. A guest without a running agent
// accepts the connection but never answers, which shows up as ctx expiring.
func DialGuestAgent(ctx context.Context, path string) (*GuestAgent, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, fmt.Errorf("guest agent: connect %s: %w", path, err)
	}
	g := &GuestAgent{conn: conn, br: bufio.NewReader(conn)}
	if err := g.sync(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return g, nil
}

// Close closes the connection.
func (g *GuestAgent) Close() error { return g.conn.Close() }

func (g *GuestAgent) deadline(ctx context.Context) func() bool {
	if dl, ok := ctx.Deadline(); ok {
		g.conn.SetDeadline(dl)
	} else {
		g.conn.SetDeadline(time.Time{})
	}
	return context.AfterFunc(ctx, func() { g.conn.SetDeadline(time.Unix(1, 0)) })
}

func (g *GuestAgent) sync(ctx context.Context) error {
	defer g.deadline(ctx)()
	token := rand.Int64N(1 << 40)
	req := fmt.Sprintf(`{"execute":"guest-sync-delimited","arguments":{"id":%d}}`+"\n", token)
	if _, err := g.conn.Write(append([]byte{0xFF}, req...)); err != nil {
		return fmt.Errorf("guest agent: %w", err)
	}
	for {
		line, err := g.br.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("guest agent not responding: %w", err)
		}
		var m struct {
			Return *int64 `json:"return"`
		}
		if json.Unmarshal(bytes.TrimLeft(line, "\xff"), &m) == nil && m.Return != nil && *m.Return == token {
			return nil
		}
	}
}

// Execute runs one guest agent command.
func (g *GuestAgent) Execute(ctx context.Context, command string, args, result any) error {
	defer g.deadline(ctx)()
	req := map[string]any{"execute": command}
	if args != nil {
		req["arguments"] = args
	}
	b, _ := json.Marshal(req)
	if _, err := g.conn.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("guest agent %s: %w", command, err)
	}
	for {
		line, err := g.br.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("guest agent %s: %w", command, err)
		}
		var m message
		if json.Unmarshal(bytes.TrimLeft(line, "\xff"), &m) != nil {
			continue
		}
		if m.Error != nil {
			m.Error.Command = command
			return m.Error
		}
		if m.Return == nil {
			continue
		}
		if result != nil {
			return json.Unmarshal(m.Return, result)
		}
		return nil
	}
}

// Freeze freezes all guest filesystems; it returns how many were frozen.
func (g *GuestAgent) Freeze(ctx context.Context) (int, error) {
	var n int
	err := g.Execute(ctx, "guest-fsfreeze-freeze", nil, &n)
	return n, err
}

// Thaw thaws all guest filesystems.
func (g *GuestAgent) Thaw(ctx context.Context) (int, error) {
	var n int
	err := g.Execute(ctx, "guest-fsfreeze-thaw", nil, &n)
	return n, err
}

// FreezeStatus returns "thawed" or "frozen".
func (g *GuestAgent) FreezeStatus(ctx context.Context) (string, error) {
	var s string
	err := g.Execute(ctx, "guest-fsfreeze-status", nil, &s)
	return s, err
}
