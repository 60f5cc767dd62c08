// Package fleetserver runs `coffer server` as a process of its own on a
// catalog filled by bench/catalogfill at fleet scale (issue 15's shape by
// default): the setup that bench/server (the REST API) and bench/console
// (the web console through Chromium) share. Filled catalogs, the
// repository and the server's state are kept in a work directory and
// reused by the next run of either benchmark (filling the shape
// takes minutes).
package fleetserver

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Server is `coffer server` running as a process of its own.
type Server struct {
	cmd *exec.Cmd
	// URL is the server's base URL (https://127.0.0.1:port).
	URL    string
	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan error
	// Started is when it was exec'd; Ready the time from then to the
	// first /readyz that answered 200.
	Started time.Time
	Ready   time.Duration
}

// Client keeps connections alive (a console or script does) and trusts
// the server's self-signed certificate without checking it: the
// benchmark talks to its own child on loopback.
var Client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	MaxIdleConnsPerHost: 8}}

// Start execs `coffer server` on a free loopback port and polls
// /readyz every millisecond until it answers 200.
// args are more of coffer's flags (--cpu-profile FILE).
func Start(coffer string, env []string, args ...string) *Server {
	port := freePort()
	s := &Server{URL: "https://127.0.0.1:" + strconv.Itoa(port), done: make(chan error, 1)}
	s.cmd = exec.Command(coffer, append([]string{"server", "--listen", "127.0.0.1:" + strconv.Itoa(port)}, args...)...)
	s.cmd.Env = append(os.Environ(), env...)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	pipe, err := s.cmd.StderrPipe()
	if err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	s.Started = start
	if err := s.cmd.Start(); err != nil {
		log.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			s.mu.Lock()
			s.stderr.WriteString(sc.Text() + "\n")
			s.mu.Unlock()
		}
		s.done <- s.cmd.Wait()
	}()
	// A fresh client per probe would measure TLS handshakes; this one is
	// reused, as the load balancer's probe is.
	for {
		res, err := Client.Get(s.URL + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				s.Ready = time.Since(start)
				return s
			}
		}
		select {
		case err := <-s.done:
			log.Fatalf("coffer server exited before it was ready: %v\n%s", err, s.Log())
		case <-time.After(time.Millisecond): // the probe's interval, not synchronisation
		}
		if time.Since(start) > 2*time.Minute {
			_ = s.cmd.Process.Kill()
			log.Fatalf("coffer server not ready after 2 minutes:\n%s", s.Log())
		}
	}
}

// Log is what the server wrote to its standard error so far.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String()
}

// PID is the server's process ID.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// PeakRSS is the process's high-water resident set (VmHWM), in bytes.
func (s *Server) PeakRSS() int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		log.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				log.Fatal(err)
			}
			return kb << 10
		}
	}
	log.Fatal("no VmHWM in /proc/PID/status")
	return 0
}

// Stop sends SIGTERM and waits for the server to drain and exit.
func (s *Server) Stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		if err != nil {
			log.Printf("coffer server ended with %v:\n%s", err, s.Log())
		}
	case <-time.After(time.Minute):
		_ = s.cmd.Process.Kill()
		log.Fatalf("coffer server did not stop within a minute of SIGTERM:\n%s", s.Log())
	}
	Client.CloseIdleConnections()
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
