// Package vcmover plays a hot-add data mover's OS for tests on vcsim
// (vclab): the disks attached to the mover VM are their flat extents.
package vcmover

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere"
	"github.com/coffer-backup/coffer/internal/testutil/vclab"
)

// MoverDevices plays a hot-add data mover's OS (vsphere.Config's
// MoverDevices): vcsim attaches no device, so the "block device" of a
// disk attached to the mover VM is its flat extent in the simulator's
// datastore directory. It answers only for a disk the mover really has
// then, as a guest sees only attached disks.
type MoverDevices struct {
	L     *vclab.Lab
	Mover string // the data-mover VM's name
}

var _ vsphere.DeviceFinder = MoverDevices{}

// Device finds the flat extent of the attached disk d.
func (f MoverDevices) Device(ctx context.Context, d vsphere.AttachedDisk) (string, error) {
	var vms []mo.VirtualMachine
	f.L.Retrieve(ctx, "VirtualMachine", []string{"name", "config.hardware.device"}, &vms)
	attached := false
	for _, vm := range vms {
		if vm.Name != f.Mover {
			continue
		}
		for _, dev := range vm.Config.Hardware.Device {
			if vd, ok := dev.(*types.VirtualDisk); ok && vd.Backing.(*types.VirtualDiskFlatVer2BackingInfo).FileName == d.File {
				attached = true
			}
		}
	}
	if !attached {
		return "", fmt.Errorf("%s is not attached to the data mover", d.File)
	}
	return sized(f.L.FlatPath(d.File))
}

var descriptorSectors = regexp.MustCompile(`(?m)^RW (\d+) `)

// sized gives a flat extent vcsim created empty the capacity its
// descriptor names: a guest sees a disk of its full size (the truncate
// makes it sparse, allocating nothing).
func sized(flat string) (string, error) {
	st, err := os.Stat(flat)
	if err != nil || st.Size() > 0 {
		return flat, err
	}
	desc, err := os.ReadFile(strings.TrimSuffix(flat, "-flat.vmdk") + ".vmdk")
	if err != nil {
		return "", err
	}
	m := descriptorSectors.FindSubmatch(desc)
	if m == nil {
		return "", fmt.Errorf("the descriptor of %s names no extent size", flat)
	}
	sectors, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return flat, os.Truncate(flat, sectors*512)
}
