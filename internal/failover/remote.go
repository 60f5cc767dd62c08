package failover

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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
	// Planned is a planned failover: the standby is at backupPoint, the
	// newest backup point, which the replication has just brought it to;
	// the source is shut down, what it wrote since is brought onto the
	// standby, which then fails over. step records each stage.
	Planned(ctx context.Context, backupPoint string, step func(name string, began time.Time, err error, detail string)) (RemotePoint, error)
	// Ready waits until the hypervisor reports the failed-over VM ready
	// (vSphere: powered on), and describes what it saw.
	Ready(ctx context.Context) (string, error)
	// StartTestCopy starts a test failover's isolated copy of point seq
	// for the run named run; the copy returned, even with an error,
	// discards what was made.
	StartTestCopy(ctx context.Context, run string, seq int) (RemoteCopy, error)
	// Host names the DR site's connection and TestCopyName the copy a
	// run starts: the run records both before it starts the copy, so
	// that RemoveLeftoversOf ends a killed run's copy.
	Host() string
	TestCopyName(run string) string
}

// RemotePoint is the restore point a remote standby failed over onto.
type RemotePoint struct {
	Seq         int
	BackupPoint string
}

// ErrRemoteUnsupported refuses what coffer does not do yet with a
// standby its DR site's hypervisor keeps (RemoteStandby).
var ErrRemoteUnsupported = errors.New("not supported for a standby kept on a vSphere DR site")

// failoverRemote fails vm over through its hypervisor (planned onto
// final[vm] when final names it, its stages recorded by step). The VM has no QEMU of coffer's: its machine has no socket and no
// forward, so the plan's tcp and http probes reach it at its Address.
func failoverRemote(ctx context.Context, step func(name string, began time.Time, err error, detail string), vm VM, final map[string]string, o Options) (*Started, error) {
	began := time.Now()
	var pt RemotePoint
	var err error
	if p, ok := final[vm.Name]; ok {
		pt, err = vm.Remote.Planned(ctx, p, step)
	} else {
		pt, err = vm.Remote.Failover(ctx, o.Seq)
	}
	if err != nil {
		return nil, err
	}
	return &Started{VM: vm.Name, Seq: pt.Seq, BackupPoint: pt.BackupPoint, Duration: time.Since(began), machine: &machine{ready: vm.Remote.Ready}}, nil
}

// remoteReady runs the hypervisor's readiness check of a failed-over
// remote standby or its test copy, bounded by the group's probe timeout.
func remoteReady(ctx context.Context, rep *Report, n int, g Group, vm VM, m *machine) bool {
	began := time.Now()
	rctx, cancel := context.WithTimeout(ctx, cmpDuration(g.ProbeTimeout, 5*time.Minute))
	defer cancel()
	out, err := m.ready(rctx)
	rep.step(n, vm.Name, "ready", began, err, out)
	return err == nil
}

// rehearseRemote starts a test failover's copy of a remote standby. The
// machine it returns, even with an error, discards what was made.
func rehearseRemote(ctx context.Context, vm VM, dir, run string, seq int) (*machine, error) {
	if vm.CloudInit != "" {
		return nil, fmt.Errorf("%s: cloud-init data is attached to QEMU standbys only: %w", vm.Name, ErrRemoteUnsupported)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	rec := copyRecord{Host: vm.Remote.Host(), Name: vm.Remote.TestCopyName(run), Dir: filepath.Join(abs, copyDirPrefix+run)}
	if err := writeCopyRecord(dir, rec); err != nil {
		return nil, err
	}
	cp, err := vm.Remote.StartTestCopy(ctx, run, seq)
	if cp == nil {
		return nil, err
	}
	return &machine{ready: cp.Ready, discard: cp.Discard, isolated: true}, err
}

// skipProbes records that a test copy on a network coffer does not
// reach is not probed: its readiness is the hypervisor's word alone.
func skipProbes(rep *Report, n int, g Group, vm VM) {
	rep.step(n, vm.Name, "probes", time.Now(), nil,
		fmt.Sprintf("%d probe(s) not run: the copy is on an isolated port group that coffer does not reach", len(g.Probes)))
}

// RemoteCopy is a test failover's copy of a remote standby, isolated,
// which its hypervisor runs.
type RemoteCopy interface {
	Name() string
	// Ready waits until the hypervisor reports the copy ready.
	Ready(ctx context.Context) (string, error)
	// Discard ends the copy and removes what the test made for it.
	Discard(ctx context.Context) error
}
