package instant

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
)

// Commit moves the running VM of session s onto production storage: each
// disk is mirrored (overlay plus what it still reads from the backup) to
// targetDir/KEY.FORMAT while the VM runs, then the VM switches to the new
// files in one step and stops reading from the backup. The session's
// server is stopped and the overlays removed. On failure the VM keeps
// running from the backup and the session stays as it was.
func Commit(ctx context.Context, s *Session, targetDir, format string) error {
	if s.State == StateCommitted {
		return fmt.Errorf("session %s is already committed to %v", s.ID, s.Targets)
	}
	if !s.VMAlive() {
		return fmt.Errorf("session %s: the recovered VM (pid %d) is not running; discard the session", s.ID, s.VMPID)
	}
	if format != "raw" && format != "qcow2" {
		return fmt.Errorf("target format must be raw or qcow2, not %q", format)
	}
	if err := os.MkdirAll(targetDir, 0o755); err != nil {
		return err
	}
	var targets []qemu.MirrorTarget
	var paths []string
	for _, d := range s.Disks {
		if len(d.Nodes) == 0 {
			return fmt.Errorf("disk %s has no named block node (a -drive disk): it cannot be mirrored", d.Key)
		}
		p := filepath.Join(targetDir, d.Key+"."+format)
		targets = append(targets, qemu.MirrorTarget{Node: d.Nodes[0], Path: p, Format: format, OldNodes: d.Nodes})
		paths = append(paths, p)
	}
	s.State = StateCommitting
	if err := s.Save(); err != nil {
		return err
	}
	if err := qemu.MirrorAndPivot(ctx, s.QMPSocket, targets); err != nil {
		for _, p := range paths {
			_ = os.Remove(p) // the mirror failed: best effort
		}
		s.State = StateRunning
		return errors.Join(err, s.Save())
	}
	s.State, s.Targets = StateCommitted, paths
	if err := s.Save(); err != nil {
		return err
	}
	stopServer(s)
	for _, d := range s.Disks {
		_ = os.Remove(d.Overlay) // pivoted away from: a leftover only costs space
	}
	return nil
}

// Discard ends session s. A VM still running from the backup is stopped
// and its overlays (everything it wrote) deleted; a committed VM is left
// alone and only the session record goes.
func Discard(ctx context.Context, s *Session) error {
	if s.State != StateCommitted && s.VMAlive() {
		if err := qemu.Quit(ctx, s.QMPSocket); err != nil {
			return fmt.Errorf("stop the recovered VM: %w", err)
		}
	}
	stopServer(s)
	if s.State == StateCommitted {
		// The VM still uses the directory's monitor socket and console.
		return os.Remove(s.path())
	}
	return os.RemoveAll(s.Dir)
}

// stopServer ends the process serving the session, unless that is us.
func stopServer(s *Session) {
	if s.ServerPID != os.Getpid() && s.ServerAlive() {
		_ = syscall.Kill(s.ServerPID, syscall.SIGTERM)
	}
}
