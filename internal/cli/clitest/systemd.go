package clitest

import (
	"net"
	"path/filepath"
	"strings"
	"time"
)

// NotifySocket listens where a child coffer sends its sd_notify messages
// as systemd would (NOTIFY_SOCKET, set in the env's variables), and
// returns expect: it reads the messages up to one holding want (a line
// such as "READY=1"), failing the test after a minute without it.
func (e *Env) NotifySocket() (expect func(want string) string) {
	t := e.T
	sock := filepath.Join(e.Dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	e.Vars["NOTIFY_SOCKET"] = sock
	return func(want string) string {
		t.Helper()
		buf := make([]byte, 4096)
		for {
			_ = conn.SetReadDeadline(time.Now().Add(time.Minute)) // a failure guard
			n, err := conn.Read(buf)
			if err != nil {
				t.Fatalf("no %s from coffer: %v", want, err)
			}
			if msg := string(buf[:n]); strings.Contains("\n"+msg+"\n", "\n"+want+"\n") {
				return msg
			}
		}
	}
}
