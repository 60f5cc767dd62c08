package backup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/hostexec"
	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// Hook is a pair of commands run around a VM's snapshot so that the point
// is application-consistent (policy.Hook is how a policy writes them).
type Hook struct {
	Name    string
	InGuest bool // through the guest agent; else on the backup host
	Pre     []string
	Post    []string
	Timeout time.Duration // each command; 0 is DefaultHookTimeout
	// Required: a failed pre command fails the backup (no point is made);
	// otherwise the point is made and records that its hooks failed.
	Required bool
}

// DefaultHookTimeout bounds each hook command when its policy does not.
const DefaultHookTimeout = time.Minute

// What a point records of its hooks (repo.Point.Hooks).
const (
	HooksOK         = "ok"          // every pre and post command succeeded
	HooksPreFailed  = "pre-failed"  // the point is not application-consistent
	HooksPostFailed = "post-failed" // the point is; the application may need attention
)

// GuestRunner runs a command inside a VM through its guest agent; the
// connectors whose guests have one implement it. The output is a line of
// evidence for the task log.
type GuestRunner interface {
	GuestRun(ctx context.Context, vm hypervisor.VMRef, argv []string) (string, error)
}

// hookRun runs one VM's hooks: every pre command in order before the
// snapshot, then the post command of every hook whose pre phase was
// reached, in reverse order, whatever happened in between (a post command
// undoes what its pre did, so it must run even when the snapshot failed).
type hookRun struct {
	hooks   []Hook
	vm      hypervisor.VMRef
	env     []string
	guest   GuestRunner // nil: the connector has no guest agent
	reached int         // hooks whose pre phase ran (or was skipped: no pre)
	preErr  bool
	postErr bool
	notes   []string // warnings for the point and the task log
}

func newHookRun(hooks []Hook, conn hypervisor.Connector, vm hypervisor.VMRef, connection string) *hookRun {
	h := &hookRun{hooks: hooks, vm: vm,
		env: []string{"COFFER_VM=" + vm.Name, "COFFER_VM_ID=" + vm.ID, "COFFER_CONNECTION=" + connection}}
	h.guest, _ = conn.(GuestRunner)
	return h
}

// pre runs the pre commands. It returns an error when a required hook
// failed: the backup must not go on (post still runs).
func (h *hookRun) pre(ctx context.Context) error {
	for _, hk := range h.hooks {
		h.reached++
		if len(hk.Pre) == 0 {
			continue
		}
		if err := h.run(ctx, hk, "pre", hk.Pre); err != nil {
			h.preErr = true
			if hk.Required {
				return fmt.Errorf("pre-snapshot hook %s failed, and the policy requires it (on-failure: fail): %w", hk.label(), err)
			}
			h.notes = append(h.notes, fmt.Sprintf("pre-snapshot hook %s failed; the point is not application-consistent: %v", hk.label(), err))
		}
	}
	return nil
}

// post runs the post commands of the hooks reached. It runs with a
// context of its own, so a cancelled backup still resumes the application.
func (h *hookRun) post(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	for i := h.reached - 1; i >= 0; i-- {
		hk := h.hooks[i]
		if len(hk.Post) == 0 {
			continue
		}
		if err := h.run(ctx, hk, "post", hk.Post); err != nil {
			h.postErr = true
			h.notes = append(h.notes, fmt.Sprintf("post-snapshot hook %s failed; check the application: %v", hk.label(), err))
		}
	}
}

// outcome is what the point records; "" when no hook ran.
func (h *hookRun) outcome() string {
	switch {
	case len(h.hooks) == 0:
		return ""
	case h.preErr:
		return HooksPreFailed
	case h.postErr:
		return HooksPostFailed
	}
	return HooksOK
}

func (h *hookRun) run(ctx context.Context, hk Hook, phase string, argv []string) error {
	timeout := hk.Timeout
	if timeout <= 0 {
		timeout = DefaultHookTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if !hk.InGuest {
		_, err := hostexec.Run(ctx, argv[0], argv, append(h.env, "COFFER_HOOK="+hk.Name, "COFFER_PHASE="+phase))
		return err
	}
	if h.guest == nil {
		return errors.New("this connection cannot run commands in guests (no guest agent API)")
	}
	_, err := h.guest.GuestRun(ctx, h.vm, argv)
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("%s did not finish within %s (it may still run in the guest): %w", argv[0], timeout, err)
	}
	return err
}

func (hk Hook) label() string {
	where := "host"
	if hk.InGuest {
		where = "guest"
	}
	if hk.Name == "" {
		return fmt.Sprintf("%q (%s)", hk.firstProgram(), where)
	}
	return fmt.Sprintf("%s (%s)", hk.Name, where)
}

func (hk Hook) firstProgram() string {
	if len(hk.Pre) > 0 {
		return hk.Pre[0]
	}
	if len(hk.Post) > 0 {
		return hk.Post[0]
	}
	return ""
}
