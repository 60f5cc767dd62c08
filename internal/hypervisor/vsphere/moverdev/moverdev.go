// Package moverdev finds, inside a Linux data-mover VM, the block device
// of a disk hot-added to it: the SCSI hosts are rescanned, then the disk
// shows as /dev/disk/by-id/wwn-0x<its UUID> (the VM needs
// disk.EnableUUID=TRUE, so that the guest sees the UUIDs).
package moverdev

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vmware/govmomi/vim25/types"
)

// ByUUID waits for the disk with the virtual disk UUID uuid to appear,
// rescanning the SCSI hosts, and returns its device path.
func ByUUID(ctx context.Context, uuid string) (string, error) {
	if uuid == "" {
		return "", errors.New("the attached disk has no UUID")
	}
	p := "/dev/disk/by-id/wwn-0x" + strings.ToLower(strings.ReplaceAll(uuid, "-", ""))
	hosts, _ := filepath.Glob("/sys/class/scsi_host/host*/scan")
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, h := range hosts {
			_ = os.WriteFile(h, []byte("- - -"), 0o200)
		}
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%s did not appear (is disk.EnableUUID=TRUE set on the data-mover VM?): %w", p, ctx.Err())
		case <-tick.C:
		}
	}
}

// FreeSCSIUnit picks a SCSI controller of the data mover and a unit on it
// no device uses (unit 7 is the controller's own).
func FreeSCSIUnit(devs []types.BaseVirtualDevice) (ctrl, unit, bus int32, err error) {
	used := map[int32]map[int32]bool{}
	for _, d := range devs {
		v := d.GetVirtualDevice()
		if v.UnitNumber != nil {
			if used[v.ControllerKey] == nil {
				used[v.ControllerKey] = map[int32]bool{}
			}
			used[v.ControllerKey][*v.UnitNumber] = true
		}
	}
	for _, d := range devs {
		c, ok := d.(types.BaseVirtualSCSIController)
		if !ok {
			continue
		}
		sc := c.GetVirtualSCSIController()
		for u := int32(0); u < 16; u++ {
			if u != sc.ScsiCtlrUnitNumber && u != 7 && !used[sc.Key][u] {
				return sc.Key, u, sc.BusNumber, nil
			}
		}
	}
	return 0, 0, 0, errors.New("no SCSI controller with a free unit: add a (paravirtual) SCSI controller to the data-mover VM")
}
