package qemu

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/qmp"
)

// serveChardevs is a QMP monitor that knows two commands: enough to ask
// which chardevs a VM has. The live tests use real QEMU; this one checks
// what the connector does not do (connect to a silent agent).
func serveChardevs(t *testing.T, sock string, chardevs string) {
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		fmt.Fprintln(c, `{"QMP":{"version":{"qemu":{"major":7,"minor":2,"micro":0}}}}`)
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			var req struct {
				Execute string `json:"execute"`
				ID      int    `json:"id"`
			}
			json.Unmarshal(sc.Bytes(), &req)
			switch req.Execute {
			case "qmp_capabilities":
				fmt.Fprintf(c, `{"return":{},"id":%d}`+"\n", req.ID)
			case "query-chardev":
				fmt.Fprintf(c, `{"return":%s,"id":%d}`+"\n", chardevs, req.ID)
			default:
				fmt.Fprintf(c, `{"error":{"class":"CommandNotFound","desc":"no"},"id":%d}`+"\n", req.ID)
			}
		}
	}()
}

// The agent's state comes from whether the guest opened its port, not from
// asking the agent: a configured channel with no agent behind it is never
// connected to (it would accept and stay silent until a timeout).
func TestGuestAgentStateFromChardev(t *testing.T) {
	for _, tc := range []struct {
		name     string
		chardev  string // the VM's agent chardev path, relative to dir ("" for none)
		open     bool   // its frontend-open
		wantOpen bool
	}{
		{"agent-running", "vm1.qga", true, true},
		{"channel-without-agent", "vm1.qga", false, false},
		{"same-socket-other-spelling", "link/vm1.qga", true, true},
		{"socket-of-no-chardev", "", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			mon, agent := filepath.Join(dir, "vm1.qmp"), filepath.Join(dir, "vm1.qga")
			silent, err := net.Listen("unix", agent) // accepts, never answers
			if err != nil {
				t.Fatal(err)
			}
			defer silent.Close()
			if err := os.Symlink(dir, filepath.Join(dir, "link")); err != nil {
				t.Fatal(err)
			}
			devs := fmt.Sprintf(`[{"label":"coffer","filename":"disconnected:unix:%s,server=on","frontend-open":true}`, mon)
			if tc.chardev != "" {
				devs += fmt.Sprintf(`,{"label":"qga0","filename":"disconnected:unix:%s,server=on","frontend-open":%t}`,
					filepath.Join(dir, tc.chardev), tc.open)
			}
			serveChardevs(t, mon, devs+"]")
			ctx := context.Background()
			cl, err := qmp.Dial(ctx, mon)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if got := guestAgentRunning(ctx, cl, guestAgentPath(mon)); got != tc.wantOpen {
				t.Fatalf("guest agent running = %v, want %v", got, tc.wantOpen)
			}
			if pendingConnection(t, silent.(*net.UnixListener)) {
				t.Fatal("the connector connected to the agent's socket")
			}
		})
	}
}

func TestChardevSocketPath(t *testing.T) {
	for _, tc := range []struct {
		filename, want string
	}{
		{"unix:/run/vm1.qga,server=on", "/run/vm1.qga"},
		{"disconnected:unix:/run/vm1.qga,server=on", "/run/vm1.qga"},
		{"unix:/run/vm1.qga,server=on <-> unix:", "/run/vm1.qga"},
		{"unix:/run/vm1.qga", "/run/vm1.qga"},
		{"unix:", ""},
		{"stdio", ""},
		{"pty:/dev/pts/3", ""},
	} {
		got, ok := chardevSocketPath(tc.filename)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("chardevSocketPath(%q) = %q, %v; want %q", tc.filename, got, ok, tc.want)
		}
	}
}

// pendingConnection reports whether a connection waits in l's backlog,
// without waiting: a raw accept on the non-blocking descriptor (a Go
// Accept with a deadline in the past gives up before looking).
func pendingConnection(t *testing.T, l *net.UnixListener) bool {
	rc, err := l.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var acceptErr error
	err = rc.Control(func(fd uintptr) {
		var nfd int
		nfd, _, acceptErr = unix.Accept(int(fd))
		if acceptErr == nil {
			unix.Close(nfd)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if acceptErr != nil && acceptErr != unix.EAGAIN {
		t.Fatal(acceptErr)
	}
	return acceptErr == nil
}
