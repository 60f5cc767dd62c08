package libvirt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// DefineStandby defines, or redefines, a replica's standby as a domain of
// this connection's host: the source's recorded definition with the
// standby's name and UUID, its interfaces on the DR site's networks (every
// one mapped), and its disks naming sb.Disks, files that only a failover
// creates (above the chosen point), so that a start by mistake fails for
// want of its disks and never writes a restore point. Autostart is set
// off at every definition. A standby domain that runs (a failover) is not
// redefined.
func (c *Connector) DefineStandby(ctx context.Context, cfg hypervisor.VMConfig, sb hypervisor.Standby) error {
	if cfg.Kind != "libvirt" {
		return fmt.Errorf("%w: a libvirt standby needs a libvirt domain's backup point, not a %q VM's", hypervisor.ErrUnsupported, cfg.Kind)
	}
	if err := c.elsewhere(); err != nil {
		return err
	}
	var native NativeConfig
	if err := json.Unmarshal(cfg.Native, &native); err != nil || native.DomainXML == "" {
		return fmt.Errorf("libvirt: the backup point records no domain definition")
	}
	disks := map[string]newDisk{}
	for key, path := range sb.Disks {
		disks[key] = newDisk{Path: path, Format: "qcow2"}
	}
	networks := sb.Networks
	if networks == nil {
		networks = map[string]string{}
	}
	doc, err := rewriteXML(native.DomainXML, &identity{name: sb.Name, uuid: sb.UUID, keepMACs: true, networks: networks}, disks)
	if err != nil {
		return err
	}
	lv, err := c.client(ctx)
	if err != nil {
		return err
	}
	if err := c.refuseRunning(ctx, lv, sb); err != nil {
		return err
	}
	dom, err := call(ctx, c.cfg.CallTimeout, "define standby "+sb.Name, func() (golibvirt.Domain, error) { return lv.DomainDefineXML(doc) })
	if err != nil {
		return err
	}
	if err := do(ctx, c.cfg.CallTimeout, "mark standby "+sb.Name, func() error {
		return lv.DomainSetMetadata(dom, int32(golibvirt.DomainMetadataElement), golibvirt.OptString{`<standby/>`},
			golibvirt.OptString{"coffer"}, golibvirt.OptString{standbyNS}, golibvirt.DomainAffectConfig)
	}); err != nil {
		return err
	}
	return do(ctx, c.cfg.CallTimeout, "autostart off "+sb.Name, func() error { return lv.DomainSetAutostart(dom, 0) })
}

// standbyNS is the namespace of the metadata element that marks a
// standby's domain: the inventory leaves such a domain out (it is a copy
// kept by a replication, not a VM to back up, and its disks do not exist
// until a failover).
const standbyNS = "https://coffer-backup.org/xmlns/standby/1"

// errStandby is describe's answer for a standby's domain.
var errStandby = errors.New("libvirt: a coffer standby's domain")

// refuseRunning fails when the standby's domain exists and is not shut
// off: its definition is then the failed-over VM's.
func (c *Connector) refuseRunning(ctx context.Context, lv *golibvirt.Libvirt, sb hypervisor.Standby) error {
	dom, err := c.lookup(ctx, lv, hypervisor.VMRef{ID: sb.UUID})
	if errors.Is(err, hypervisor.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	st, _, err := lv.DomainGetState(dom, 0)
	if err != nil {
		return fmt.Errorf("libvirt: state of standby %s: %w", sb.Name, err)
	}
	if golibvirt.DomainState(st) != golibvirt.DomainShutoff {
		return fmt.Errorf("libvirt: the standby domain %s is %s: it is not redefined while it runs (fail back first)", sb.Name, stateName(st))
	}
	return nil
}
