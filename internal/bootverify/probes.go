package bootverify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/qmp"
)

// Probe kinds.
const (
	ProbeTCP  = "tcp"  // the guest port accepts a connection
	ProbeHTTP = "http" // GET on the guest port answers Status
	ProbeExec = "exec" // a command run through the guest agent exits 0
)

// Probe is an application check of step 5.
type Probe struct {
	Kind    string   `json:"kind"`
	Port    int      `json:"port,omitempty"`
	Path    string   `json:"path,omitempty"`
	Status  int      `json:"status,omitempty"`
	Command []string `json:"command,omitempty"`
}

func (p Probe) String() string {
	switch p.Kind {
	case ProbeHTTP:
		return fmt.Sprintf("http:%d%s=%d", p.Port, p.Path, p.Status)
	case ProbeExec:
		return "exec:" + strings.Join(p.Command, " ")
	}
	return fmt.Sprintf("tcp:%d", p.Port)
}

// ParseProbe reads a probe as the command line writes it: tcp:PORT,
// http:PORT[/PATH][=STATUS] (status 200 by default) or exec:COMMAND ARGS...
func ParseProbe(s string) (Probe, error) {
	kind, rest, ok := strings.Cut(s, ":")
	bad := func(why string) (Probe, error) {
		return Probe{}, fmt.Errorf("probe %q: %s (want tcp:PORT, http:PORT/PATH=STATUS or exec:COMMAND)", s, why)
	}
	if !ok || rest == "" {
		return bad("no kind or target")
	}
	port := func(p string) (int, error) {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return 0, fmt.Errorf("%q is not a port", p)
		}
		return n, nil
	}
	switch kind {
	case ProbeTCP:
		n, err := port(rest)
		if err != nil {
			return bad(err.Error())
		}
		return Probe{Kind: ProbeTCP, Port: n}, nil
	case ProbeHTTP:
		target, status := rest, "200"
		if i := strings.LastIndex(rest, "="); i >= 0 {
			target, status = rest[:i], rest[i+1:]
		}
		p, path := target, "/"
		if i := strings.Index(target, "/"); i >= 0 {
			p, path = target[:i], target[i:]
		}
		n, err := port(p)
		if err != nil {
			return bad(err.Error())
		}
		st, err := strconv.Atoi(status)
		if err != nil || st < 100 || st > 599 {
			return bad(fmt.Sprintf("%q is not an HTTP status", status))
		}
		return Probe{Kind: ProbeHTTP, Port: n, Path: path, Status: st}, nil
	case ProbeExec:
		f := strings.Fields(rest)
		if len(f) == 0 {
			return bad("no command")
		}
		return Probe{Kind: ProbeExec, Command: f}, nil
	}
	return bad("unknown kind " + kind)
}

// probeOnce runs p once: nil when it passes, with evidence.
func probeOnce(ctx context.Context, p Probe, hostPort int, agent func(context.Context) (*qmp.GuestAgent, error)) (string, error) {
	return probeAt(ctx, p, "127.0.0.1", hostPort, agent)
}

// probeAt runs p once against host:port.
func probeAt(ctx context.Context, p Probe, host string, port int, agent func(context.Context) (*qmp.GuestAgent, error)) (string, error) {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	switch p.Kind {
	case ProbeTCP:
		return tcpOpen(ctx, addr)
	case ProbeHTTP:
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+p.Path, nil)
		if err != nil {
			return "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		ev := fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
		if resp.StatusCode != p.Status {
			return ev, fmt.Errorf("GET %s answered %d, want %d", p.Path, resp.StatusCode, p.Status)
		}
		return ev, nil
	case ProbeExec:
		ga, err := agent(ctx)
		if err != nil {
			return "", err
		}
		return ga.Exec(ctx, p.Command)
	}
	return "", fmt.Errorf("unknown probe kind %q", p.Kind)
}

// errClosed is a guest port that refused the connection.
var errClosed = errors.New("the guest port is closed")

// tcpOpen connects through QEMU's forwarding. The host side of a forward
// always accepts; when the guest refuses, QEMU closes the connection at
// once. So the port is open when the connection brings data or stays up
// for a moment, closed when it ends first.
func tcpOpen(ctx context.Context, addr string) (string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(tcpSettle))
	n, err := c.Read(make([]byte, 1))
	var ne net.Error
	switch {
	case n > 0:
		return "connected; the guest sent data", nil
	case errors.As(err, &ne) && ne.Timeout():
		return "connected; the connection stayed open", nil
	}
	return "", errClosed
}

// tcpSettle is how long a forwarded connection must stay up to count as
// accepted by the guest. QEMU closes a refused one as soon as the guest's
// reset reaches it: milliseconds on an idle host, but an emulated (TCG)
// guest on a busy one took more than 500 ms (a CI run counted a closed
// port as open), so an open port without data costs 2 s.
const tcpSettle = 2 * time.Second

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// Check runs probe p until it passes or ctx ends, as step 5 does, against
// a guest whose probed ports are reachable at host: either QEMU's
// forwards on 127.0.0.1 (forward maps guest port to host port) or the
// guest's own address (forward nil). agentSock is the guest agent's
// socket for exec probes ("" when the VM has none). Failover plans use
// it between their groups.
func Check(ctx context.Context, p Probe, host string, forward map[int]int, agentSock string) (string, error) {
	agent := func(ctx context.Context) (*qmp.GuestAgent, error) {
		if agentSock == "" {
			return nil, errors.New("the VM has no guest agent channel to run the command through")
		}
		ga, err := qmp.DialGuestAgent(ctx, agentSock)
		if err == nil {
			if err = ga.Execute(ctx, "guest-ping", nil, nil); err != nil {
				ga.Close()
			}
		}
		return ga, err
	}
	port := p.Port
	if forward != nil {
		port = forward[p.Port]
	}
	return retry(ctx, func(ctx context.Context) (string, error) { return probeAt(ctx, p, host, port, agent) })
}
