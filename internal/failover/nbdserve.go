package failover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"

	"github.com/coffer-backup/coffer/internal/nbd"
	"github.com/coffer-backup/coffer/internal/nbd/qemunbd"
)

// served is one image file served by qemu-nbd (QEMU's own block layer
// reads and writes qcow2) to one NBD connection of coffer's.
type served struct {
	*nbd.Conn
	srv *qemunbd.Server
}

// allocationDepth is qemu-nbd's meta context (with -A) that says, for
// each extent, which layer of the image's backing chain holds it: 1 for
// the top image itself.
const allocationDepth = "qemu:allocation-depth"

// serve serves file with qemu-nbd and connects to it: read-only with its
// allocation depths when readOnly, else writable. qemu-nbd exits when the
// connection closes, and dies with coffer (qemunbd).
func serve(ctx context.Context, file string, readOnly bool) (*served, error) {
	format, err := imageFormat(ctx, file)
	if err != nil {
		return nil, err
	}
	args := []string{"-e", "1", "-x", "disk", "-f", format, "--cache=writeback"}
	var o nbd.ClientOptions
	o.Export = "disk"
	if readOnly {
		args = append(args, "-r", "-A")
		o.MetaContexts = []string{allocationDepth}
	}
	srv, err := qemunbd.Start(file, args...)
	if err != nil {
		return nil, err
	}
	s := &served{srv: srv}
	if s.Conn, err = nbd.Dial(ctx, "unix", srv.Sock, o); err != nil {
		reason := srv.Reason(ctx) // before the kill, which would cut it short
		srv.Kill()
		return nil, fmt.Errorf("qemu-nbd %s: %w: %s", file, err, reason)
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
	return errors.Join(ferr, cerr, s.srv.Wait(ctx))
}

func (s *served) kill() {
	_ = s.Conn.Close()
	s.srv.Kill()
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
