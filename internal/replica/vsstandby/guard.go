package vsstandby

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
)

// A standby is never started by accident. vSphere offers no public way
// to forbid a VM's power-on, so three guards stand in for it:
//   - its mark (extraConfig markKey, and its annotation for the people
//     who see it in the vSphere Client) says whose standby it is; a run
//     writes only onto a VM that carries the replication's own mark;
//   - its network adapters are not connected at power-on until a
//     failover connects them: a start by hand runs off the network, with
//     no second copy of a production address on it;
//   - a run finds a standby powered on outside a failover and refuses it
//     (power it off; the next run reverts it to the newest point, which
//     discards what the start wrote).
const (
	markKey     = "coffer.standby"
	failoverKey = "coffer.standby.failover"
)

// ErrFailedOver refuses to write onto, or to fail over again, a standby
// that failover made the running VM.
var ErrFailedOver = errors.New("the standby was failed over")

// ErrNotStandby refuses a VM that does not carry the replication's mark.
var ErrNotStandby = errors.New("the VM is not this replication's standby")

// failedOver is the failover's record on the standby (extraConfig
// failoverKey): it is set before anything else a failover does.
type failedOver struct {
	Seq      int       `json:"seq"`
	At       time.Time `json:"at"`
	Reverted bool      `json:"reverted"`
	// Planned: the point equals the source as it shut down.
	Planned bool `json:"planned,omitempty"`
	// WrittenBack: a failback wrote the DR site's changes onto the
	// original; what it does next no longer needs the DR VM's disks.
	WrittenBack bool `json:"written_back,omitempty"`
}

// standbyVM is the standby as vSphere shows it.
type standbyVM struct {
	ref      types.ManagedObjectReference
	vm       mo.VirtualMachine
	mark     string
	failover *failedOver
}

var standbyProps = []string{"name", "config.extraConfig", "config.hardware.device", "runtime.powerState", "snapshot"}

// findStandby finds the VM called name; nil when there is none.
func findStandby(ctx context.Context, c *vim25.Client, name string) (*standbyVM, error) {
	v, err := view.NewManager(c).CreateContainerView(ctx, c.ServiceContent.RootFolder, []string{"VirtualMachine"}, true)
	if err != nil {
		return nil, err
	}
	defer func() { _ = v.Destroy(context.WithoutCancel(ctx)) }() // a view of the session
	refs, err := v.Find(ctx, []string{"VirtualMachine"}, property.Match{"name": name})
	switch {
	case err != nil:
		return nil, err
	case len(refs) == 0:
		return nil, nil
	case len(refs) > 1:
		return nil, fmt.Errorf("%d VMs are named %s: the standby's name must be unique", len(refs), name)
	}
	return loadStandby(ctx, c, refs[0])
}

func loadStandby(ctx context.Context, c *vim25.Client, ref types.ManagedObjectReference) (*standbyVM, error) {
	s := &standbyVM{ref: ref}
	if err := property.DefaultCollector(c).RetrieveOne(ctx, ref, standbyProps, &s.vm); err != nil {
		return nil, err
	}
	if s.vm.Config == nil {
		return nil, fmt.Errorf("VM %s has no configuration", ref.Value)
	}
	for _, o := range s.vm.Config.ExtraConfig {
		ov := o.GetOptionValue()
		val, _ := ov.Value.(string)
		switch ov.Key {
		case markKey:
			s.mark = val
		case failoverKey:
			if val != "" {
				s.failover = new(failedOver)
				if err := json.Unmarshal([]byte(val), s.failover); err != nil {
					return nil, fmt.Errorf("standby %s: its failover record: %w", s.vm.Name, err)
				}
			}
		}
	}
	return s, nil
}

// check refuses a VM that is not the standby marked mark, or that runs.
func (s *standbyVM) check(mark string) error {
	if s.mark != mark {
		return fmt.Errorf("%w: %s carries the mark %q, not %q", ErrNotStandby, s.vm.Name, s.mark, mark)
	}
	if s.failover != nil {
		return fmt.Errorf("%w: %s runs from point %d since %s; fail it back first (coffer failover failback)", ErrFailedOver, s.vm.Name, s.failover.Seq, s.failover.At.Format(time.RFC3339))
	}
	if s.vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOff {
		return fmt.Errorf("the standby %s is %s outside a failover: power it off; the next run reverts it to its newest point", s.vm.Name, s.vm.Runtime.PowerState)
	}
	return nil
}

// guard marks a new standby and disconnects its adapters at power-on.
func guard(ctx context.Context, c *vim25.Client, ref types.ManagedObjectReference, mark, source string) error {
	s, err := loadStandby(ctx, c, ref)
	if err != nil {
		return err
	}
	spec := types.VirtualMachineConfigSpec{
		Annotation:   fmt.Sprintf("coffer standby of %s (%s): do not power on; coffer fails it over", source, mark),
		ExtraConfig:  []types.BaseOptionValue{&types.OptionValue{Key: markKey, Value: mark}},
		DeviceChange: connectAtPowerOn(s.vm.Config.Hardware.Device, false),
	}
	return reconfigure(ctx, c, ref, spec)
}

// connectAtPowerOn edits every network adapter to connect, or not, when
// the VM powers on.
func connectAtPowerOn(devs []types.BaseVirtualDevice, on bool) []types.BaseVirtualDeviceConfigSpec {
	var out []types.BaseVirtualDeviceConfigSpec
	for _, d := range devs {
		if _, ok := d.(types.BaseVirtualEthernetCard); !ok {
			continue
		}
		v := d.GetVirtualDevice()
		v.Connectable = &types.VirtualDeviceConnectInfo{StartConnected: on, AllowGuestControl: true, Connected: false}
		out = append(out, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationEdit, Device: d})
	}
	return out
}

// recordFailover sets (or, with nil, clears) the failover record.
func recordFailover(ctx context.Context, c *vim25.Client, ref types.ManagedObjectReference, fo *failedOver) error {
	val := ""
	if fo != nil {
		b, err := json.Marshal(fo)
		if err != nil {
			return err
		}
		val = string(b)
	}
	return reconfigure(ctx, c, ref, types.VirtualMachineConfigSpec{ExtraConfig: []types.BaseOptionValue{&types.OptionValue{Key: failoverKey, Value: val}}})
}

func reconfigure(ctx context.Context, c *vim25.Client, ref types.ManagedObjectReference, spec types.VirtualMachineConfigSpec) error {
	task, err := object.NewVirtualMachine(c, ref).Reconfigure(ctx, spec)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		return fmt.Errorf("reconfigure the standby: %w", err)
	}
	return nil
}

// diskFiles are the files the standby's disks name now, by device key
// (after a snapshot on vSphere, each disk's newest delta).
func (s *standbyVM) diskFiles() map[int32]*types.VirtualDisk {
	out := map[int32]*types.VirtualDisk{}
	for _, d := range s.vm.Config.Hardware.Device {
		if vd, ok := d.(*types.VirtualDisk); ok {
			out[vd.Key] = vd
		}
	}
	return out
}
