package replica

import (
	"bytes"
	"context"
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

// coffer does not write qcow2 itself: qemu-nbd, QEMU's own block layer,
// serves the new overlay and coffer's NBD client writes the changed spans
// into it. Zero spans become qcow2 zero clusters (NBD write-zeroes), which
// read as zeros whatever the backing file holds.

// nbdPIDName is qemu-nbd's pid file in the standby's directory, so that a
// run killed before it connected can have the next run end its server.
const nbdPIDName = ".qemu-nbd.pid"

// overlayWriter is a writable NBD connection to one overlay file.
type overlayWriter struct {
	*nbd.Conn
	pid     int
	pidfd   int
	sockDir string
	pidFile string
}

// openOverlay serves file (a qcow2 overlay) with qemu-nbd and connects to
// it. qemu-nbd is not persistent: it exits when coffer's connection
// closes, also when coffer is killed.
func openOverlay(ctx context.Context, dir, file string) (*overlayWriter, error) {
	sockDir, err := os.MkdirTemp("", "coffer-replica-")
	if err != nil {
		return nil, err
	}
	sock := filepath.Join(sockDir, "nbd.sock")
	pidFile := filepath.Join(dir, nbdPIDName)
	// --fork returns once the server listens; -e 1: one client.
	cmd := qemuCommand(ctx, "qemu-nbd", "--fork", "--pid-file", pidFile, "-e", "1", "-x", "disk",
		"-k", sock, "-f", "qcow2", "--cache=writeback", file)
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(sockDir) // best effort after the error returned
		return nil, fmt.Errorf("qemu-nbd %s: %v: %s", file, err, strings.TrimSpace(string(out)))
	}
	w := &overlayWriter{sockDir: sockDir, pidFile: pidFile, pidfd: -1}
	w.pid, err = readPID(pidFile)
	if err == nil {
		w.pidfd, err = unix.PidfdOpen(w.pid, 0)
	}
	if err == nil {
		w.Conn, err = nbd.Dial(ctx, "unix", sock, nbd.ClientOptions{Export: "disk"})
	}
	if err != nil {
		w.kill()
		return nil, err
	}
	return w, nil
}

// Close flushes the overlay, disconnects and waits until qemu-nbd has
// exited (its data written and its image lock released).
func (w *overlayWriter) Close(ctx context.Context) error {
	ferr := w.Flush(ctx)
	cerr := w.Conn.Close()
	werr := w.wait(ctx)
	_ = os.RemoveAll(w.sockDir) // an empty directory left by qemu-nbd's socket
	_ = os.Remove(w.pidFile)    // qemu-nbd removes it itself when it can
	return errors.Join(ferr, cerr, werr)
}

// wait blocks until the server process ends (its pidfd turns readable).
func (w *overlayWriter) wait(ctx context.Context) error { return pidfd.Wait(ctx, w.pidfd) }

// kill ends the server after a failure.
func (w *overlayWriter) kill() {
	if w.Conn != nil {
		_ = w.Conn.Close()
	}
	if w.pidfd >= 0 {
		pidfd.Kill(w.pidfd)
	} else if w.pid > 0 {
		_ = syscall.Kill(w.pid, syscall.SIGKILL)
	}
	_ = os.RemoveAll(w.sockDir)
	_ = os.Remove(w.pidFile)
}

func readPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s: not a process id: %q", path, b)
	}
	return pid, nil
}

// endLeftoverServer ends the qemu-nbd a killed run left serving a file of
// dir (it waits for a client that will never come), if its pid file names
// one that is still qemu-nbd serving a file of dir.
func endLeftoverServer(dir string) {
	pidFile := filepath.Join(dir, nbdPIDName)
	pid, err := readPID(pidFile)
	if err != nil {
		_ = os.Remove(pidFile)
		return
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err == nil && bytes.Contains(cmdline, []byte("qemu-nbd")) && bytes.Contains(cmdline, []byte(dir+string(filepath.Separator))) {
		if fd, err := unix.PidfdOpen(pid, 0); err == nil {
			pidfd.Kill(fd)
		}
	}
	_ = os.Remove(pidFile)
}

// qemuCommand runs a QEMU tool that dies with coffer: a killed run must not
// leave a qemu-img writing into the standby behind it.
func qemuCommand(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}
