package testutil

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// smtpdScript runs aiosmtpd for StartSMTP (see its doc string).
//
//go:embed smtpd.py
var smtpdScript []byte

// SMTPPython is the interpreter with aiosmtpd that scripts/ci/install-smtp.sh
// installs (into .cache/bin).
const SMTPPython = "coffer-aiosmtpd-python"

// SMTPOptions configure a test SMTP server.
type SMTPOptions struct {
	Port int    // 0: a free port
	TLS  string // "" or "none", "starttls" (required before MAIL), "implicit"
	// Cert and Key are the server's PEM files (NewTLSFiles) for TLS.
	Cert, Key string
	// User and PasswordFile require AUTH (PLAIN or LOGIN) with them.
	User, PasswordFile string
	// RejectRcpt is refused with 550 at RCPT TO.
	RejectRcpt string
}

// SMTPServer is a running test SMTP server (aiosmtpd in its own process).
type SMTPServer struct {
	Host string
	Port int
	Dir  string // one NNNN.json per accepted message
	stop func()
}

// Mail is one message the server accepted.
type Mail struct {
	MailFrom  string   `json:"mail_from"`
	RcptTos   []string `json:"rcpt_tos"`
	AuthUser  string   `json:"auth_user"`
	Encrypted bool     `json:"encrypted"`
	Data      string   `json:"data"` // headers and body as received
}

// StartSMTP starts an SMTP server on 127.0.0.1 that records every message
// it accepts; it stops when the test ends (or with Stop), and dies with
// the test binary.
func StartSMTP(t testing.TB, o SMTPOptions) *SMTPServer {
	t.Helper()
	python := RequireBinary(t, SMTPPython)
	dir := t.TempDir()
	script := filepath.Join(dir, "smtpd.py")
	if err := os.WriteFile(script, smtpdScript, 0o600); err != nil {
		t.Fatal(err)
	}
	mails := filepath.Join(dir, "mail")
	if err := os.Mkdir(mails, 0o700); err != nil {
		t.Fatal(err)
	}
	var lastErr error
	for range 5 { // a free port can be taken between the probe and the bind
		port := o.Port
		if port == 0 {
			var err error
			if port, err = freePort(); err != nil {
				t.Fatal(err)
			}
		}
		s := &SMTPServer{Host: "127.0.0.1", Port: port, Dir: mails}
		if lastErr = s.start(python, script, o); lastErr == nil {
			t.Cleanup(s.Stop)
			return s
		}
		if o.Port != 0 {
			break
		}
	}
	t.Fatalf("start the SMTP server: %v", lastErr)
	return nil
}

func (s *SMTPServer) start(python, script string, o SMTPOptions) error {
	args := []string{script, "--listen", fmt.Sprintf("%s:%d", s.Host, s.Port), "--dir", s.Dir}
	if o.TLS != "" {
		args = append(args, "--tls", o.TLS, "--cert", o.Cert, "--key", o.Key)
	}
	if o.User != "" {
		args = append(args, "--user", o.User, "--password-file", o.PasswordFile)
	}
	if o.RejectRcpt != "" {
		args = append(args, "--reject-rcpt", o.RejectRcpt)
	}
	cmd := exec.Command(python, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	ready := make(chan bool, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- strings.TrimSpace(line) == "ready"
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { _ = cmd.Wait(); close(exited) }()
	s.stop = func() {
		_ = stdin.Close() // the script exits when its input ends
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}
	// The deadline only bounds a server that hangs: readiness is its
	// "ready" line.
	select {
	case ok := <-ready:
		if ok {
			return nil
		}
	case <-time.After(60 * time.Second):
	}
	s.stop()
	return fmt.Errorf("aiosmtpd on port %d did not start: %s", s.Port, stderr.String())
}

// Stop stops the server (again is a no-op).
func (s *SMTPServer) Stop() {
	if s.stop != nil {
		s.stop()
		s.stop = nil
	}
}

// Mails returns the messages accepted so far, in order.
func (s *SMTPServer) Mails(t testing.TB) []Mail {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(s.Dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	out := make([]Mail, len(names))
	for i, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, &out[i]); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
	}
	return out
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago
// (for a server a test starts later on a port it configured first).
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Addr is host:port.
func (s *SMTPServer) Addr() string { return s.Host + ":" + strconv.Itoa(s.Port) }
