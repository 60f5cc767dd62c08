package failover

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RemoteStandby is a standby that its DR site's hypervisor keeps and
// starts itself, with no file of coffer's on the DR host: a VM of a
// vSphere DR site (internal/replica/vsstandby). Its failover record lives
// with the VM, so a second failover is refused there.
type RemoteStandby interface {
	// Failover makes the standby the running VM from its point seq (0:
	// the newest), and says which point it runs from.
	Failover(ctx context.Context, seq int) (RemotePoint, error)
	// Ready waits until the hypervisor reports the failed-over VM ready
	// (vSphere: powered on), and describes what it saw.
	Ready(ctx context.Context) (string, error)
}

// RemotePoint is the restore point a remote standby failed over onto.
type RemotePoint struct {
	Seq         int
	BackupPoint string
}

// ErrRemoteUnsupported refuses what coffer does not do yet with a
// standby its DR site's hypervisor keeps (RemoteStandby).
var ErrRemoteUnsupported = errors.New("not supported for a standby kept on a vSphere DR site")

// failoverRemote fails vm over through its hypervisor. The VM has no
// QEMU of coffer's: its machine has no socket and no forward, so the
// plan's tcp and http probes reach it at its Address.
func failoverRemote(ctx context.Context, vm VM, final map[string]string, o Options) (*Started, error) {
	if _, ok := final[vm.Name]; ok {
		return nil, fmt.Errorf("a planned failover of %s: %w (fail over unplanned, after a last replication)", vm.Name, ErrRemoteUnsupported)
	}
	began := time.Now()
	pt, err := vm.Remote.Failover(ctx, o.Seq)
	if err != nil {
		return nil, err
	}
	return &Started{VM: vm.Name, Seq: pt.Seq, BackupPoint: pt.BackupPoint, Duration: time.Since(began), machine: &machine{}}, nil
}

// remoteReady runs the hypervisor's readiness check of a failed-over
// remote standby, bounded by the group's probe timeout.
func remoteReady(ctx context.Context, rep *Report, n int, g Group, vm VM) bool {
	began := time.Now()
	rctx, cancel := context.WithTimeout(ctx, cmpDuration(g.ProbeTimeout, 5*time.Minute))
	defer cancel()
	out, err := vm.Remote.Ready(rctx)
	rep.step(n, vm.Name, "ready", began, err, out)
	return err == nil
}
