package libvirt

import (
	"context"
	"fmt"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// quiesce freezes the guest's filesystems through libvirt's guest agent
// API and returns the thaw, and whether the guest is frozen: with the
// fallback policy a missing or failing agent is a warning and frozen is
// false. The journal says "frozen" before the freeze is asked for, so a
// coffer killed in between still has cleanup thaw the guest.
func (s *session) quiesce(ctx context.Context) (thaw func() error, frozen bool, err error) {
	fallback := func(why error) (func() error, bool, error) {
		if s.req.Quiesce == hypervisor.QuiesceRequired {
			return nil, false, fmt.Errorf("%w: %v", hypervisor.ErrQuiesceFailed, why)
		}
		s.warnings = append(s.warnings, fmt.Sprintf("guest agent did not quiesce (%v); the backup is crash-consistent", why))
		return func() error { return nil }, false, nil
	}
	if !s.x.guestAgentConnected() {
		return fallback(fmt.Errorf("no guest agent connected to domain %s", s.dom.Name))
	}
	s.j.Frozen = true
	if err := s.j.save(); err != nil {
		return nil, false, err
	}
	thaw = func() error {
		if err := s.c.thaw(ctx, s, s.t.Quiesce); err != nil {
			return err
		}
		s.j.Frozen = false
		return s.j.save()
	}
	if err := do(ctx, s.t.Quiesce, "freeze the guest filesystems of "+s.dom.Name, func() error {
		_, err := s.lv.DomainFsfreeze(s.dom, nil, 0)
		return err
	}); err != nil {
		// A freeze that timed out may still happen: thaw regardless.
		if terr := thaw(); terr != nil {
			return nil, false, fmt.Errorf("%w: freeze failed (%v) and the thaw too: %v", hypervisor.ErrQuiesceFailed, err, terr)
		}
		return fallback(err)
	}
	return thaw, true, nil
}

// thaw thaws with a fresh deadline: a thaw must be attempted even when
// the caller's context is done.
func (c *Connector) thaw(ctx context.Context, s *session, limit time.Duration) error {
	return do(context.WithoutCancel(ctx), limit, "thaw the guest filesystems of "+s.dom.Name, func() error {
		_, err := s.lv.DomainFsthaw(s.dom, nil, 0)
		return err
	})
}

// suspend pauses the domain for the snapshot instant and returns the
// resume, journalled like a freeze.
func (s *session) suspend(ctx context.Context) (resume func() error, err error) {
	s.j.Suspended = true
	if err := s.j.save(); err != nil {
		return nil, err
	}
	resume = func() error {
		if err := s.c.resume(ctx, s.lv, s.dom); err != nil {
			return err
		}
		s.j.Suspended = false
		return s.j.save()
	}
	if err := do(ctx, s.c.cfg.CallTimeout, "pause domain "+s.dom.Name, func() error { return s.lv.DomainSuspend(s.dom) }); err != nil {
		// A pause that timed out may still happen: resume regardless.
		if rerr := resume(); rerr != nil {
			err = fmt.Errorf("%w (and resuming: %v)", err, rerr)
		}
		return nil, err
	}
	return resume, nil
}

// resume resumes a domain coffer paused, if it is (still) paused, with a
// fresh deadline.
func (c *Connector) resume(ctx context.Context, lv *golibvirt.Libvirt, dom golibvirt.Domain) error {
	ctx = context.WithoutCancel(ctx)
	st, err := call(ctx, c.cfg.CallTimeout, "state of domain "+dom.Name, func() (int32, error) {
		st, _, err := lv.DomainGetState(dom, 0)
		return st, err
	})
	if err != nil || stateName(st) != "paused" {
		return err
	}
	return do(ctx, c.cfg.CallTimeout, "resume domain "+dom.Name, func() error { return lv.DomainResume(dom) })
}
