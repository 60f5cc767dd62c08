package vsstandby

import (
	"context"
	"fmt"
	"time"

	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/failover"
	"github.com/coffer-backup/coffer/internal/hypervisor"
)

// Standby is one standby VM of a vSphere DR site as a failover plan
// starts it (failover.RemoteStandby): Failover above, then the vSphere
// side's readiness.
type Standby struct {
	Client *vim25.Client
	// Name is the standby VM's name, Mark its replication's mark.
	Name string
	Mark string
	// Connection names the DR site's connection (a test failover records
	// it with each copy).
	Connection string
	Now        func() time.Time

	// For a planned failover: the DR site's connection (with Client),
	// the source VM, the points kept and where write journals go.
	DR       DiskConn
	Source   *Source
	Keep     int
	StateDir string
}

var _ failover.RemoteStandby = Standby{}

// Failover makes the standby the running VM from its point seq (0: the
// newest).
func (s Standby) Failover(ctx context.Context, seq int) (failover.RemotePoint, error) {
	now := time.Now
	if s.Now != nil {
		now = s.Now
	}
	pt, err := Failover(ctx, s.Client, s.Name, s.Mark, seq, now())
	if err != nil {
		return failover.RemotePoint{}, err
	}
	return failover.RemotePoint{Seq: pt.Seq, BackupPoint: pt.BackupPoint}, nil
}

// Planned shuts the source down, brings what it wrote after backupPoint
// onto the standby as a final point and fails over onto it
// (PlannedFailover).
func (s Standby) Planned(ctx context.Context, backupPoint string, step func(string, time.Time, error, string)) (failover.RemotePoint, error) {
	if s.DR == nil || s.Source == nil {
		return failover.RemotePoint{}, fmt.Errorf("a planned failover of %s needs its source VM's connection", s.Name)
	}
	pt, err := PlannedFailover(ctx, PlannedOptions{DR: s.DR, Source: *s.Source, Name: s.Name, Mark: s.Mark, BackupPoint: backupPoint,
		Keep: s.Keep, StateDir: s.StateDir, Now: s.Now, Step: step})
	if err != nil {
		return failover.RemotePoint{}, err
	}
	return failover.RemotePoint{Seq: pt.Seq, BackupPoint: pt.BackupPoint}, nil
}

// Ready waits until vCenter reports the standby powered on. It is what
// vSphere itself can tell without a guest: whether the guest's services
// answer is for the plan's tcp and http probes, at the VM's address.
func (s Standby) Ready(ctx context.Context) (string, error) {
	sb, err := findStandby(ctx, s.Client, s.Name)
	if err != nil {
		return "", err
	}
	if sb == nil {
		return "", fmt.Errorf("no standby VM %s: %w", s.Name, hypervisor.ErrNotFound)
	}
	return poweredOn(ctx, s.Client, sb.ref, s.Name)
}

// poweredOn waits until vCenter reports the VM ref powered on.
func poweredOn(ctx context.Context, c *vim25.Client, ref types.ManagedObjectReference, name string) (string, error) {
	var state types.VirtualMachinePowerState
	err := property.Wait(ctx, property.DefaultCollector(c), ref, []string{"runtime.powerState"}, func(pc []types.PropertyChange) bool {
		for _, c := range pc {
			if v, ok := c.Val.(types.VirtualMachinePowerState); ok {
				state = v
			}
		}
		return state == types.VirtualMachinePowerStatePoweredOn
	})
	if err != nil {
		return "", fmt.Errorf("%s did not report powered on (%s): %w", name, state, err)
	}
	return fmt.Sprintf("vCenter reports %s powered on", name), nil
}

// FailedOver says whether the standby called name is failed over: the
// point it runs from and since when (ok false: it is not).
func FailedOver(ctx context.Context, c *vim25.Client, name string) (seq int, since time.Time, ok bool, err error) {
	sb, err := findStandby(ctx, c, name)
	if err != nil {
		return 0, time.Time{}, false, err
	}
	if sb == nil {
		return 0, time.Time{}, false, fmt.Errorf("no standby VM %s: %w", name, hypervisor.ErrNotFound)
	}
	if sb.failover == nil {
		return 0, time.Time{}, false, nil
	}
	return sb.failover.Seq, sb.failover.At, true, nil
}

// FailoverPoint is the point the standby called name runs from (ok
// false: it is not failed over).
func FailoverPoint(ctx context.Context, c *vim25.Client, name string) (Point, bool, error) {
	sb, err := findStandby(ctx, c, name)
	if err != nil {
		return Point{}, false, err
	}
	if sb == nil {
		return Point{}, false, fmt.Errorf("no standby VM %s: %w", name, hypervisor.ErrNotFound)
	}
	if sb.failover == nil {
		return Point{}, false, nil
	}
	ps, err := points(sb.vm)
	if err != nil {
		return Point{}, true, err
	}
	pt, err := pointOf(ps, sb.failover.Seq)
	return pt, true, err
}
