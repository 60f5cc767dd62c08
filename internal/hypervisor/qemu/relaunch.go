package qemu

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/coffer-backup/coffer/internal/qmp"
)

// CreateNBDOverlay creates a qcow2 overlay at path whose backing file is
// the NBD export name served on the unix socket sock: the VM writes to the
// overlay and reads what it has not written from the backup.
//
// reconnectDelay is how long QEMU holds guest requests while the server is
// away before failing them (which, with LaunchSpec.StopOnError, pauses the
// VM instead of reporting errors to the guest).
func CreateNBDOverlay(ctx context.Context, path, sock, export string, size int64, reconnectDelay time.Duration) error {
	// The protocol node goes under "file": the backing format (raw) is
	// the node QEMU builds on top of it.
	backing, _ := json.Marshal(map[string]any{"file": map[string]any{
		"driver": "nbd", "export": export, "reconnect-delay": int(reconnectDelay / time.Second),
		"server": map[string]string{"type": "unix", "path": sock},
	}})
	// -u: the size is given, so qemu-img need not open the backing file.
	out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-u", "-f", "qcow2",
		"-F", "raw", "-b", "json:"+string(backing), path, strconv.FormatInt(size, 10)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("qemu-img create overlay: %v: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Launch starts QEMU with args from RelaunchArgs (which daemonize it) and
// returns its PID once it runs: QEMU's parent process exits only after
// the VM is set up, so errors in the command line surface here.
func Launch(ctx context.Context, args []string, spec LaunchSpec) (int, error) {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("start %s: %v: %s", args[0], err, strings.TrimSpace(string(out)))
	}
	b, err := os.ReadFile(spec.PIDPath())
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// MirrorTarget is one disk moved to production storage.
type MirrorTarget struct {
	Node   string // the disk's format node in the running VM
	Path   string // the new file on production storage
	Format string // "raw" or "qcow2"
	// OldNodes are the nodes the disk leaves behind, deleted after the
	// pivot in this order (format node, then its file node), so nothing
	// keeps the NBD connection to the backup open.
	OldNodes []string
}

// MirrorAndPivot copies every disk of the running VM behind sock to its
// target while the VM runs (blockdev-mirror, sync=full: the overlay and
// what it still reads from the backup), then switches the VM to the
// targets and closes the old nodes. On failure before the switch the VM
// keeps running on its old disks and the half-written targets are
// detached; the caller removes the files.
func MirrorAndPivot(ctx context.Context, sock string, targets []MirrorTarget) error {
	cl, err := qmp.Dial(ctx, sock)
	if err != nil {
		return err
	}
	defer func() { _ = cl.Close() }()
	sub := cl.Subscribe()
	defer sub.Cancel()
	var started []string
	abort := func(cause error) error {
		for i, t := range targets {
			if i < len(started) {
				if cl.Execute(ctx, "block-job-cancel", map[string]any{"device": started[i], "force": true}, nil) == nil {
					_, _ = sub.Wait(ctx, "BLOCK_JOB_CANCELLED", qmp.FieldIs("device", started[i]))
				}
			}
			_ = cl.Execute(ctx, "blockdev-del", map[string]any{"node-name": "coffer-target-" + t.Node}, nil)
			_ = cl.Execute(ctx, "blockdev-del", map[string]any{"node-name": "coffer-target-" + t.Node + "-file"}, nil)
		}
		return cause
	}
	for _, t := range targets {
		var size struct {
			Size int64 `json:"virtual-size"`
		}
		if err := nodeImage(ctx, cl, t.Node, &size); err != nil {
			return abort(err)
		}
		if err := createImage(ctx, t.Path, t.Format, size.Size); err != nil {
			return abort(err)
		}
		file := "coffer-target-" + t.Node + "-file"
		if err := cl.Execute(ctx, "blockdev-add", map[string]any{"driver": "file", "node-name": file, "filename": t.Path}, nil); err != nil {
			return abort(err)
		}
		if err := cl.Execute(ctx, "blockdev-add", map[string]any{"driver": t.Format, "node-name": "coffer-target-" + t.Node, "file": file}, nil); err != nil {
			return abort(err)
		}
	}
	for _, t := range targets {
		job := "coffer-mirror-" + t.Node
		if err := cl.Execute(ctx, "blockdev-mirror", map[string]any{"job-id": job, "device": t.Node,
			"target": "coffer-target-" + t.Node, "sync": "full"}, nil); err != nil {
			return abort(err)
		}
		started = append(started, job)
	}
	// Ready means source and target are in sync and stay so (writes go to
	// both) until the pivot; a job that fails first completes with an error.
	for _, job := range started {
		if err := waitJob(ctx, sub, job, "BLOCK_JOB_READY"); err != nil {
			return abort(err)
		}
	}
	for _, job := range started {
		if err := cl.Execute(ctx, "job-complete", map[string]any{"id": job}, nil); err != nil {
			return abort(err)
		}
	}
	var errs []error
	for _, job := range started {
		errs = append(errs, waitJob(ctx, sub, job, "BLOCK_JOB_COMPLETED"))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, t := range targets {
		for _, n := range t.OldNodes {
			if err := cl.Execute(ctx, "blockdev-del", map[string]any{"node-name": n}, nil); err != nil {
				return fmt.Errorf("switched to %s, but the old node %s stays open: %w", t.Path, n, err)
			}
		}
	}
	return nil
}

// waitJob waits for a block job's event (BLOCK_JOB_READY or
// BLOCK_JOB_COMPLETED); a completion carrying an error is that error.
func waitJob(ctx context.Context, sub *qmp.Subscription, job, want string) error {
	for {
		ev, err := sub.Wait(ctx, "", nil)
		if err != nil {
			return err
		}
		if (ev.Name != want && ev.Name != "BLOCK_JOB_COMPLETED") || !qmp.FieldIs("device", job)(ev.Data) {
			continue
		}
		var d struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(ev.Data, &d)
		if d.Error != "" {
			return fmt.Errorf("mirror %s: %s", job, d.Error)
		}
		if ev.Name != want {
			return fmt.Errorf("mirror %s ended before it was ready", job)
		}
		return nil
	}
}

// nodeImage fills v from the image information of a named node.
func nodeImage(ctx context.Context, cl *qmp.Client, node string, v any) error {
	var nodes []struct {
		NodeName string          `json:"node-name"`
		Image    json.RawMessage `json:"image"`
	}
	if err := cl.Execute(ctx, "query-named-block-nodes", map[string]any{"flat": true}, &nodes); err != nil {
		return err
	}
	for _, n := range nodes {
		if n.NodeName == node {
			return json.Unmarshal(n.Image, v)
		}
	}
	return fmt.Errorf("qemu: the VM has no block node %q", node)
}

// createImage creates an empty target image, refusing to replace a file.
func createImage(ctx context.Context, path, format string, size int64) error {
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("%s exists; refusing to overwrite it", path)
	}
	out, err := exec.CommandContext(ctx, "qemu-img", "create", "-q", "-f", format, path, strconv.FormatInt(size, 10)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("qemu-img create %s: %v: %s", path, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Resume continues a VM that paused on an I/O error (its backup's NBD
// server was away), once the server is back. QEMU reconnects to the server
// in the background with a growing delay (up to 16 s in QEMU 7.2), so a
// resumed VM may pause again on the same read: Resume retries until the VM
// keeps running through a settle period, or ctx ends. It does nothing to a
// VM that runs or was paused for any other reason.
func Resume(ctx context.Context, sock string) (bool, error) {
	cl, err := qmp.Dial(ctx, sock)
	if err != nil {
		return false, err
	}
	defer func() { _ = cl.Close() }()
	sub := cl.Subscribe()
	defer sub.Cancel()
	resumed := false
	for settle := time.Second; ; settle = min(2*settle, 20*time.Second) {
		var st struct {
			Status string `json:"status"`
		}
		if err := cl.Execute(ctx, "query-status", nil, &st); err != nil {
			return resumed, err
		}
		if st.Status != "io-error" {
			return resumed, nil
		}
		if err := cl.Execute(ctx, "cont", nil, nil); err != nil {
			return resumed, err
		}
		resumed = true
		wait, cancel := context.WithTimeout(ctx, settle)
		_, err := sub.Wait(wait, "STOP", nil)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return resumed, ctx.Err()
			}
			return resumed, nil // ran through the settle period
		}
	}
}

// Quit stops the VM behind sock (instant recovery discarded).
func Quit(ctx context.Context, sock string) error {
	cl, err := qmp.Dial(ctx, sock)
	if err != nil {
		return err
	}
	defer func() { _ = cl.Close() }()
	err = cl.Execute(ctx, "quit", nil, nil)
	if errors.Is(err, qmp.ErrClosed) {
		return nil
	}
	select {
	case <-cl.Done():
	case <-ctx.Done():
		return ctx.Err()
	}
	return err
}
