package failover

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/coffer-backup/coffer/internal/id"
)

// maxSocketPath is the longest path a unix socket can have on Linux
// (sun_path is 108 bytes with its terminating NUL): QEMU refuses longer
// ones ("UNIX socket path is too long").
const maxSocketPath = 107

// socketRoom is what a socket's name may add to its directory's path
// (RelaunchArgs names them DIR/ID.sock, by the chardev's id).
const socketRoom = 40

// socketLinkName is a VM's link, in its directory of a test run, to the
// short directory that holds its QEMU's sockets, pid file and console
// log. RemoveLeftovers follows it to stop a killed run's QEMU and remove
// that directory too.
const socketLinkName = "sockets"

// shortSocketDir gives a test failover's VM, whose directory is vmDir, a
// private directory with a short path for its QEMU's sockets: the run
// directory is under the state directory, whose path may be too long for
// a socket. The link in vmDir is made before the directory, so that a
// kill -9 at any instant leaves nothing RemoveLeftovers does not find.
func shortSocketDir(vmDir string) (string, error) {
	root := os.TempDir()
	if len(root) > maxSocketPath-socketRoom-12 {
		root = "/tmp"
	}
	dir := filepath.Join(root, "coffer-fo-"+id.Random().String()[:6])
	if len(dir)+socketRoom > maxSocketPath {
		return "", fmt.Errorf("no directory for a test failover's sockets: %s is too long for a unix socket's path (at most %d bytes); set TMPDIR to a shorter one", dir, maxSocketPath)
	}
	if err := os.Symlink(dir, filepath.Join(vmDir, socketLinkName)); err != nil {
		return "", err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", err
	}
	return dir, nil
}

// socketDirOf is the directory of the sockets of a test run's VM in
// vmDir: the target of its link, or vmDir itself when it has none.
func socketDirOf(vmDir string) string {
	target, err := os.Readlink(filepath.Join(vmDir, socketLinkName))
	if err != nil || !strings.HasPrefix(filepath.Base(target), "coffer-fo-") {
		return vmDir
	}
	return target
}

// removeSocketDirs removes the socket directories the VMs of run link to
// (the run directory itself is removed by its caller).
func removeSocketDirs(run string) error {
	vms, _ := filepath.Glob(filepath.Join(run, "*"))
	var errs []error
	for _, d := range vms {
		if s := socketDirOf(d); s != d {
			errs = append(errs, os.RemoveAll(s))
		}
	}
	return errors.Join(errs...)
}
