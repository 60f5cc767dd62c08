package qemu

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// hold is the snapshot instant of a session whose disks are read from a
// storage snapshot (SnapshotRequest.Hold): the guest frozen when asked,
// the VM stopped (QMP stop drains and flushes every disk, qcow2 metadata
// included, so the files are complete and still), change tracking handed
// over, and the VM left stopped until Release. Nothing is switched and no
// fleecing image is made: the storage snapshot is the point-in-time image.
//
// The journal says Stopped and Frozen before each happens, so a coffer
// killed inside the window leaves a VM that the next start's
// CleanupLeftovers thaws and resumes (teardown).
func (s *session) hold(ctx context.Context) (err error) {
	var thaw func()
	if s.req.Mode == hypervisor.Quiesced {
		var frozen bool
		if thaw, frozen, err = s.quiesce(ctx); err != nil {
			return err
		}
		if frozen {
			s.achieved = hypervisor.Quiesced
		}
	}
	resume := func() error {
		var errs []error
		if s.j.Stopped {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			if cerr := s.cl.Execute(cctx, "cont", nil, nil); cerr != nil {
				errs = append(errs, fmt.Errorf("resume VM: %w", cerr))
			} else {
				s.j.Stopped = false
				errs = append(errs, s.j.save())
			}
		}
		if thaw != nil { // after cont: a frozen guest needs its CPUs to thaw
			thaw()
			thaw = nil
		}
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, resume())
			return
		}
		s.unhold = resume
	}()
	if s.info.Status != "running" {
		s.notRunning()
		return s.handOverBitmaps(ctx)
	}
	s.j.Stopped = true
	if err := s.j.save(); err != nil {
		return err
	}
	if err := s.cl.Execute(ctx, "stop", nil, nil); err != nil {
		return err
	}
	return s.handOverBitmaps(ctx)
}
