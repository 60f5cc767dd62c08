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
	"github.com/coffer-backup/coffer/internal/nbd/qemunbd"
	"github.com/coffer-backup/coffer/internal/pidfd"
)

// coffer does not write qcow2 itself: qemu-nbd, QEMU's own block layer,
// serves the new overlay and coffer's NBD client writes the changed spans
// into it. Zero spans become qcow2 zero clusters (NBD write-zeroes), which
// read as zeros whatever the backing file holds.

// nbdPIDName is the pid file coffer's earlier versions had qemu-nbd write
// in the standby's directory (--fork): a run killed before it connected
// left that qemu-nbd waiting, which the next run ends (endLeftoverServer).
// qemu-nbd is coffer's child now and dies with it.
const nbdPIDName = ".qemu-nbd.pid"

// overlayWriter is a writable NBD connection to one overlay file.
type overlayWriter struct {
	*nbd.Conn
	srv *qemunbd.Server
}

// openOverlay serves file (a qcow2 overlay) with qemu-nbd and connects to
// it. qemu-nbd exits when coffer's connection closes, and dies with
// coffer when it is killed.
func openOverlay(ctx context.Context, file string) (*overlayWriter, error) {
	// -e 1: one client.
	srv, err := qemunbd.Start(file, "-e", "1", "-x", "disk", "-f", "qcow2", "--cache=writeback")
	if err != nil {
		return nil, err
	}
	w := &overlayWriter{srv: srv}
	if w.Conn, err = nbd.Dial(ctx, "unix", srv.Sock, nbd.ClientOptions{Export: "disk"}); err != nil {
		reason := srv.Reason(ctx) // before the kill, which would cut it short
		srv.Kill()
		return nil, fmt.Errorf("qemu-nbd %s: %w: %s", file, err, reason)
	}
	return w, nil
}

// Close flushes the overlay, disconnects and waits until qemu-nbd has
// exited (its data written and its image lock released).
func (w *overlayWriter) Close(ctx context.Context) error {
	ferr := w.Flush(ctx)
	cerr := w.Conn.Close()
	return errors.Join(ferr, cerr, w.srv.Wait(ctx))
}

// kill ends the server after a failure.
func (w *overlayWriter) kill() {
	_ = w.Conn.Close()
	w.srv.Kill()
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
