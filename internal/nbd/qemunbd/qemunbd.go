// Package qemunbd starts qemu-nbd, QEMU's own NBD server, as a child of
// coffer that dies with it.
//
// qemu-nbd's --fork detaches a daemon that outlives its parent: a coffer
// killed between the fork and its connection left a qemu-nbd waiting for a
// client forever, holding the image open and locked. Here qemu-nbd is
// socket-activated instead, on a socket coffer listens on before it starts
// (so clients connect at once), and stays coffer's child under Pdeathsig.
package qemunbd

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Server is one qemu-nbd serving one image on a unix socket of its own.
type Server struct {
	// Sock is the socket's path.
	Sock   string
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error // the process's exit, once exited is closed
	stderr *said
}

// said is qemu-nbd's stderr, written by exec's copying goroutine while
// an error message may read it.
type said struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *said) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *said) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// Start serves file with qemu-nbd's args (its options, without a socket
// or a pid file: -x, -e, -f, -r, --cache...). Without --persistent,
// qemu-nbd exits once its last client disconnects.
func Start(file string, args ...string) (*Server, error) {
	dir, err := os.MkdirTemp("", "coffer-qemu-nbd-")
	if err != nil {
		return nil, err
	}
	s := &Server{Sock: filepath.Join(dir, "nbd.sock"), dir: dir, exited: make(chan struct{}), stderr: &said{}}
	if err := s.start(file, args); err != nil {
		_ = os.RemoveAll(dir) // best effort after the error returned
		return nil, err
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.exited)
	}()
	return s, nil
}

func (s *Server) start(file string, args []string) error {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: s.Sock, Net: "unix"})
	if err != nil {
		return err
	}
	ln.SetUnlinkOnClose(false) // the socket lives on in qemu-nbd
	f, err := ln.File()
	_ = ln.Close()
	if err != nil {
		return err
	}
	// Closed here once qemu-nbd holds its copy: were it kept open, a
	// qemu-nbd that died at start (an image it cannot open) would leave a
	// client's connection queued on a socket nobody accepts on.
	defer func() { _ = f.Close() }()
	// LISTEN_PID must be qemu-nbd's own pid: sh sets it to $$ and execs.
	s.cmd = exec.Command("sh", append([]string{"-c", `LISTEN_PID=$$ LISTEN_FDS=1 exec qemu-nbd "$@"`, "qemu-nbd"}, append(args, file)...)...)
	s.cmd.ExtraFiles = []*os.File{f} // fd 3, as socket activation expects
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("start qemu-nbd for %s: %w", file, err)
	}
	return nil
}

// Stderr is what qemu-nbd has said, for an error message.
func (s *Server) Stderr() string { return strings.TrimSpace(s.stderr.String()) }

// exitGrace bounds how long Reason waits for a dying qemu-nbd.
const exitGrace = 5 * time.Second

// Reason is what qemu-nbd said, for the error of a client it refused: a
// qemu-nbd that died at start (an image it cannot open) closes the socket
// before the copy of its stderr has its last words, so Reason first
// waits for its exit, at most exitGrace or until ctx ends (one still
// running is not waited for further).
func (s *Server) Reason(ctx context.Context) string {
	select {
	case <-s.exited:
	case <-ctx.Done():
	case <-time.After(exitGrace):
	}
	return s.Stderr()
}

// Wait blocks until qemu-nbd has exited (after its last client left: its
// writes are in the file and its image lock is released), and removes
// the socket's directory. When ctx ends first, qemu-nbd is killed.
func (s *Server) Wait(ctx context.Context) error {
	select {
	case <-s.exited:
	case <-ctx.Done():
		s.Kill()
		return ctx.Err()
	}
	_ = os.RemoveAll(s.dir)
	if s.err != nil {
		return fmt.Errorf("qemu-nbd: %w: %s", s.err, s.Stderr())
	}
	return nil
}

// Kill ends qemu-nbd at once and waits for its exit. It is idempotent.
func (s *Server) Kill() {
	_ = s.cmd.Process.Kill() // fails only once it has exited
	<-s.exited
	_ = os.RemoveAll(s.dir)
}

// Serving lists the qemu-nbd processes on this host whose command line
// names a file under dir: what a check for leftovers looks for.
func Serving(dir string) []int {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []int
	for _, p := range procs {
		b, err := os.ReadFile(p) // gone since the listing: not serving
		if err != nil || !bytes.HasPrefix(b, []byte("qemu-nbd\x00")) || !bytes.Contains(b, []byte(filepath.Clean(dir)+"/")) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}
