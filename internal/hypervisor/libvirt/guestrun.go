package libvirt

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/qmp"
)

// GuestRun runs a command in the domain through its guest agent, for
// application hooks around a snapshot (backup.GuestRunner). libvirt has no
// guest-exec API of its own, so the agent commands go through its agent
// passthrough (virDomainQemuAgentCommand, `virsh qemu-agent-command`),
// which libvirt logs as a custom agent command on the domain.
func (c *Connector) GuestRun(ctx context.Context, ref hypervisor.VMRef, argv []string) (string, error) {
	lv, err := c.client(ctx)
	if err != nil {
		return "", err
	}
	dom, err := c.lookup(ctx, lv, ref)
	if err != nil {
		return "", err
	}
	execute := func(ctx context.Context, command string, args, result any) error {
		req, err := json.Marshal(map[string]any{"execute": command, "arguments": args})
		if err != nil {
			return err
		}
		// libvirt's own bound on the agent's answer, in whole seconds.
		wait := int32(c.cfg.CallTimeout / time.Second)
		if dl, ok := ctx.Deadline(); ok {
			wait = max(1, int32(time.Until(dl)/time.Second))
		}
		out, err := call(ctx, c.cfg.CallTimeout, command+" in "+dom.Name, func() ([]string, error) {
			return lv.QEMUDomainAgentCommand(dom, string(req), wait, 0)
		})
		if err != nil {
			return err
		}
		if len(out) == 0 {
			return fmt.Errorf("libvirt: %s in %s: no answer from the guest agent", command, dom.Name)
		}
		var reply struct {
			Return json.RawMessage `json:"return"`
		}
		if err := json.Unmarshal([]byte(out[0]), &reply); err != nil {
			return fmt.Errorf("libvirt: %s in %s: %w", command, dom.Name, err)
		}
		return json.Unmarshal(reply.Return, result)
	}
	return qmp.GuestExec(ctx, execute, argv)
}
