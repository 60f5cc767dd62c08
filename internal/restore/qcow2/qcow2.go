// Package qcow2 restores a backed-up disk into a qcow2 image. coffer does
// not write qcow2 itself: it serves the disk over its NBD server and lets
// qemu-img, the reference implementation of the format, write the image.
// qemu-img asks the server which ranges are allocated, so holes stay
// holes, and nothing is staged in between.
package qcow2

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/coffer-backup/coffer/internal/nbd"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/restore/nbdexport"
)

// Write restores disk d of a backup point to a new qcow2 image at path.
// The image appears at path only when complete.
func Write(ctx context.Context, r *repo.Repository, d repo.Disk, path string, log *slog.Logger) error {
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("%s exists; refusing to overwrite it", path)
	}
	dr, err := restore.OpenDisk(ctx, r, d, restore.CacheChunks(nbdexport.CacheBytes, d.ChunkSize))
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "coffer-qcow2-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }() // a socket's directory
	sock := filepath.Join(dir, "nbd.sock")
	l, err := nbdexport.Listen("unix", sock)
	if err != nil {
		return err
	}
	exports := map[string]nbd.Export{"": nbdexport.NewExport(dr)}
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- nbdexport.Serve(serveCtx, l, exports, []string{""}, log) }()
	partial := path + ".coffer-partial"
	// -W: out-of-order writes, -m 8: parallel requests to coffer's server.
	out, cerr := exec.CommandContext(ctx, "qemu-img", "convert", "-W", "-m", "8", "-f", "raw", "-O", "qcow2",
		"nbd+unix:///?socket="+sock, partial).CombinedOutput()
	stop()
	serr := <-served
	if cerr != nil {
		_ = os.Remove(partial) // best effort after the error returned
		return fmt.Errorf("qemu-img convert: %v: %s", cerr, strings.TrimSpace(string(out)))
	}
	if serr != nil && !errors.Is(serr, context.Canceled) {
		return serr
	}
	return os.Rename(partial, path)
}
