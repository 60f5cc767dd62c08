package qemu

import (
	"context"
	"fmt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/qmp"
)

// GuestRun runs a command in the VM through its guest agent (guest-exec),
// for application hooks around a snapshot (backup.GuestRunner). The
// agent's channel serves one client at a time; a session's quiesce uses
// it only inside Snapshot, which hooks never overlap.
func (c *Connector) GuestRun(ctx context.Context, ref hypervisor.VMRef, argv []string) (string, error) {
	sock, err := c.lookup(ctx, ref)
	if err != nil {
		return "", err
	}
	ga, err := qmp.DialGuestAgent(ctx, guestAgentPath(sock))
	if err != nil {
		return "", fmt.Errorf("guest agent of %s: %w", ref.Name, err)
	}
	defer func() { _ = ga.Close() }()
	return ga.Exec(ctx, argv)
}
