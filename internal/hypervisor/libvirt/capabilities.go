package libvirt

import (
	"bytes"
	"context"
)

// GuestsEmulated says whether the host runs guests under TCG only: its
// capabilities offer no "kvm" domain type. A domain restored from
// another platform is given the type the host can start.
func (c *Connector) GuestsEmulated(ctx context.Context) (bool, error) {
	if err := c.elsewhere(); err != nil {
		return false, err
	}
	lv, err := c.client(ctx)
	if err != nil {
		return false, err
	}
	caps, err := call(ctx, c.cfg.CallTimeout, "capabilities", lv.Capabilities)
	if err != nil {
		return false, err
	}
	return !bytes.Contains(caps, []byte("<domain type='kvm'")), nil
}
