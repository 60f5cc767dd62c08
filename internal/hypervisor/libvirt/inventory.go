package libvirt

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"sort"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// Inventory implements hypervisor.Connector: every domain libvirt knows,
// running or not: a shut-off domain is backed up from its images
// (offline.go).
func (c *Connector) Inventory(ctx context.Context) ([]hypervisor.VM, error) {
	lv, err := c.client(ctx)
	if err != nil {
		return nil, err
	}
	host, err := c.host(ctx, lv)
	if err != nil {
		return nil, err
	}
	pools, err := c.pools(ctx, lv)
	if err != nil {
		return nil, err
	}
	doms, err := call(ctx, c.cfg.CallTimeout, "list domains", func() ([]golibvirt.Domain, error) {
		d, _, err := lv.ConnectListAllDomains(1, 0)
		return d, err
	})
	if err != nil {
		return nil, err
	}
	var vms []hypervisor.VM
	for _, d := range doms {
		vm, err := c.describe(ctx, lv, d, host, pools)
		if err != nil {
			if isLibvirtError(err, golibvirt.ErrNoDomain) || errors.Is(err, errStandby) {
				continue // undefined while we listed, or a replica's standby (standby.go)
			}
			return nil, err
		}
		vms = append(vms, vm)
	}
	sort.Slice(vms, func(i, j int) bool { return vms[i].Name < vms[j].Name })
	return vms, nil
}

// describe is one domain's inventory entry.
func (c *Connector) describe(ctx context.Context, lv *golibvirt.Libvirt, d golibvirt.Domain, host string, pools []pool) (hypervisor.VM, error) {
	doc, err := call(ctx, c.cfg.CallTimeout, "describe domain "+d.Name, func() (string, error) {
		return lv.DomainGetXMLDesc(d, 0)
	})
	if err != nil {
		return hypervisor.VM{}, err
	}
	x, err := parseDomain(doc)
	if err != nil {
		return hypervisor.VM{}, err
	}
	if x.Metadata.Standby != nil {
		return hypervisor.VM{}, errStandby
	}
	st, err := call(ctx, c.cfg.CallTimeout, "state of domain "+d.Name, func() (int32, error) {
		s, _, err := lv.DomainGetState(d, 0)
		return s, err
	})
	if err != nil {
		return hypervisor.VM{}, err
	}
	vm := hypervisor.VM{VMRef: hypervisor.VMRef{ID: formatUUID(d.UUID), Name: d.Name}, Host: host,
		PowerState: stateName(st), GuestAgent: x.guestAgentConnected(), ChangeTracking: true,
		Tags: map[string]string{"libvirt-uri": c.cfg.URI}}
	seen := map[string]bool{}
	for _, dx := range x.Devices.Disks {
		if !dx.backedUp() {
			continue
		}
		info, err := c.diskInfo(ctx, lv, d, dx, pools)
		if err != nil {
			return hypervisor.VM{}, err
		}
		// Checkpoints are bitmaps inside qcow2 images: a raw disk is read
		// in full every time.
		if info.Format != "qcow2" {
			vm.ChangeTracking = false
		}
		vm.Disks = append(vm.Disks, info)
		if info.Datastore != "" && !seen[info.Datastore] {
			seen[info.Datastore] = true
			vm.Datastores = append(vm.Datastores, info.Datastore)
		}
	}
	return vm, nil
}

// diskInfo describes one disk; its size is the guest-visible capacity,
// which libvirt reads from the image (also of a shut-off domain).
func (c *Connector) diskInfo(ctx context.Context, lv *golibvirt.Libvirt, d golibvirt.Domain, dx diskXML, pools []pool) (hypervisor.DiskInfo, error) {
	info := hypervisor.DiskInfo{Key: dx.Target.Dev, Name: dx.Target.Dev, Path: dx.path(), Format: dx.format(),
		Datastore: datastoreOf(dx, pools)}
	capacity, err := call(ctx, c.cfg.CallTimeout, fmt.Sprintf("size of disk %s of %s", dx.Target.Dev, d.Name), func() (uint64, error) {
		_, capacity, _, err := lv.DomainGetBlockInfo(d, dx.Target.Dev, 0)
		return capacity, err
	})
	if err != nil {
		return info, err
	}
	info.Size = int64(capacity)
	return info, nil
}

// host is the configured host name, else libvirt's.
func (c *Connector) host(ctx context.Context, lv *golibvirt.Libvirt) (string, error) {
	if c.cfg.Host != "" {
		return c.cfg.Host, nil
	}
	return call(ctx, c.cfg.CallTimeout, "host name", lv.ConnectGetHostname)
}

// pools lists the active storage pools with the directories they serve.
// A daemon without the storage driver has none: disks are then grouped by
// directory.
func (c *Connector) pools(ctx context.Context, lv *golibvirt.Libvirt) ([]pool, error) {
	list, err := call(ctx, c.cfg.CallTimeout, "list storage pools", func() ([]golibvirt.StoragePool, error) {
		p, _, err := lv.ConnectListAllStoragePools(1, golibvirt.ConnectListStoragePoolsActive)
		return p, err
	})
	if isLibvirtError(err, golibvirt.ErrNoSupport) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []pool
	for _, p := range list {
		doc, err := call(ctx, c.cfg.CallTimeout, "describe storage pool "+p.Name, func() (string, error) {
			return lv.StoragePoolGetXMLDesc(p, 0)
		})
		if err != nil {
			continue // stopped or removed while we listed
		}
		var px poolXML
		if xml.Unmarshal([]byte(doc), &px) != nil {
			continue
		}
		out = append(out, pool{name: p.Name, dir: px.Target.Path})
	}
	return out, nil
}
