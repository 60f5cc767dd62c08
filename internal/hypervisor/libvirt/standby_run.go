package libvirt

import (
	"context"
	"fmt"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// StartStandby starts the standby domain of uuid: a failover has created
// the files its disks name. A domain that already runs is refused by
// libvirt itself ("already active").
func (c *Connector) StartStandby(ctx context.Context, uuid string) error {
	lv, dom, err := c.standbyDomain(ctx, uuid)
	if err != nil {
		return err
	}
	return do(ctx, c.cfg.CallTimeout, "start standby "+uuid, func() error { return lv.DomainCreate(dom) })
}

// StopStandby stops the standby domain of uuid at once, as the QEMU
// failover path does (its monitor's quit): what the DR VM wrote is in its
// active overlays, which a failback reads next. A shut-off domain is left.
func (c *Connector) StopStandby(ctx context.Context, uuid string) error {
	lv, dom, err := c.standbyDomain(ctx, uuid)
	if err != nil {
		return err
	}
	running, err := c.domainActive(ctx, lv, dom)
	if err != nil || !running {
		return err
	}
	return do(ctx, c.cfg.CallTimeout, "stop standby "+uuid, func() error { return lv.DomainDestroy(dom) })
}

// StandbyRunning says whether the standby domain of uuid is active
// (running or paused: anything but shut off).
func (c *Connector) StandbyRunning(ctx context.Context, uuid string) (bool, error) {
	lv, dom, err := c.standbyDomain(ctx, uuid)
	if err != nil {
		return false, err
	}
	return c.domainActive(ctx, lv, dom)
}

func (c *Connector) standbyDomain(ctx context.Context, uuid string) (*golibvirt.Libvirt, golibvirt.Domain, error) {
	if err := c.elsewhere(); err != nil {
		return nil, golibvirt.Domain{}, err
	}
	lv, err := c.client(ctx)
	if err != nil {
		return nil, golibvirt.Domain{}, err
	}
	dom, err := c.lookup(ctx, lv, hypervisor.VMRef{ID: uuid})
	if err != nil {
		return nil, golibvirt.Domain{}, fmt.Errorf("the standby domain %s (run a replication first): %w", uuid, err)
	}
	return lv, dom, nil
}

func (c *Connector) domainActive(ctx context.Context, lv *golibvirt.Libvirt, dom golibvirt.Domain) (bool, error) {
	st, err := call(ctx, c.cfg.CallTimeout, "state of "+dom.Name, func() (int32, error) {
		s, _, err := lv.DomainGetState(dom, 0)
		return s, err
	})
	if err != nil {
		return false, err
	}
	return golibvirt.DomainState(st) != golibvirt.DomainShutoff, nil
}
