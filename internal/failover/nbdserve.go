package failover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/coffer-backup/coffer/internal/nbd"
	"github.com/coffer-backup/coffer/internal/pidfd"
)

// served is one image file served by qemu-nbd (QEMU's own block layer
// reads and writes qcow2) to one NBD connection of coffer's.
type served struct {
	*nbd.Conn
	pidfd   int
	sockDir string
}

// allocationDepth is qemu-nbd's meta context (with -A) that says, for
// each extent, which layer of the image's backing chain holds it: 1 for
// the top image itself.
const allocationDepth = "qemu:allocation-depth"

// serve serves file with qemu-nbd and connects to it: read-only with its
// allocation depths when readOnly, else writable. qemu-nbd exits when the
// connection closes (also when coffer dies: Pdeathsig before --fork's
// child detaches is not enough, so -e 1 and the connection end it).
func serve(ctx context.Context, file string, readOnly bool) (*served, error) {
	format, err := imageFormat(ctx, file)
	if err != nil {
		return nil, err
	}
	sockDir, err := os.MkdirTemp("", "coffer-failback-")
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(sockDir, "nbd.sock")
	pidFile := filepath.Join(sockDir, "pid")
	args := []string{"--fork", "--pid-file", pidFile, "-e", "1", "-x", "disk", "-k", sock, "-f", format, "--cache=writeback"}
	var o nbd.ClientOptions
	o.Export = "disk"
	if readOnly {
		args = append(args, "-r", "-A")
		o.MetaContexts = []string{allocationDepth}
	}
	cmd := exec.CommandContext(ctx, "qemu-nbd", append(args, file)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(sockDir) // best effort after the error returned
		return nil, fmt.Errorf("qemu-nbd %s: %v: %s", file, err, strings.TrimSpace(string(out)))
	}
	s := &served{sockDir: sockDir, pidfd: -1}
	b, err := os.ReadFile(pidFile)
	if err == nil {
		var pid int
		if pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			s.pidfd, err = unix.PidfdOpen(pid, 0)
		}
	}
	if err == nil {
		s.Conn, err = nbd.Dial(ctx, "unix", sock, o)
	}
	if err != nil {
		s.kill()
		return nil, err
	}
	return s, nil
}

// Close flushes (a writable image), disconnects and waits until qemu-nbd
// has exited: its writes are in the file and its image lock is released.
func (s *served) Close(ctx context.Context, flush bool) error {
	var ferr error
	if flush {
		ferr = s.Flush(ctx)
	}
	cerr := s.Conn.Close()
	werr := s.wait(ctx)
	_ = os.RemoveAll(s.sockDir) // the socket's directory
	return errors.Join(ferr, cerr, werr)
}

func (s *served) wait(ctx context.Context) error { return pidfd.Wait(ctx, s.pidfd) }

func (s *served) kill() {
	if s.Conn != nil {
		_ = s.Conn.Close()
	}
	pidfd.Kill(s.pidfd)
	_ = os.RemoveAll(s.sockDir)
}

// imageFormat asks qemu-img what a file is (raw or qcow2).
func imageFormat(ctx context.Context, file string) (string, error) {
	out, err := exec.CommandContext(ctx, "qemu-img", "info", "-U", "--output=json", file).Output()
	if err != nil {
		return "", fmt.Errorf("qemu-img info %s: %w", file, err)
	}
	var info struct {
		Format string `json:"format"`
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return "", err
	}
	return info.Format, nil
}
