package failover

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/coffer-backup/coffer/internal/replica"
)

// Options adjust a failover.
type Options struct {
	// Seq is the restore point to start from (0: the newest).
	Seq int
	// Planned says the source was shut down and its final point
	// replicated (Planned checks it): the failback then moves only what
	// the DR VM wrote.
	Planned bool
	Now     func() time.Time
	Log     *slog.Logger
	// Watch hears of each step and probe of a plan's run as it ends.
	Watch Watcher
}

// runDirName is the failed-over VM's directory in its standby's: its
// writable overlays, QEMU's sockets, pid file and console log.
const runDirName = "failover"

// pidName is the pid of the failed-over QEMU, written by coffer (QEMU's
// own pid file goes as it starts to exit).
const pidName = "coffer-qemu.pid"

// Started is a VM a failover started.
type Started struct {
	VM          string        `json:"vm"`
	Seq         int           `json:"seq"`
	BackupPoint string        `json:"backup_point"`
	PID         int           `json:"pid"`
	Dir         string        `json:"dir"`
	Resumed     bool          `json:"resumed,omitempty"`
	Duration    time.Duration `json:"duration_ns"`
	// machine is the started QEMU, for the plan's checks.
	machine *machine
}

// ErrAlreadyFailedOver refuses a second failover of a standby whose VM runs.
var ErrAlreadyFailedOver = errors.New("the standby is already failed over and its VM runs")

// Failover makes vm's standby the running VM, from point o.Seq. The
// record notes it first, so that no replication writes onto the standby
// from then on, and a failover killed at any instant is finished by the
// next one: a standby noted as failed over whose VM does not run is
// started again on the overlays it has (which may hold the DR site's
// writes), never on new ones.
func Failover(ctx context.Context, vm VM, o Options) (*Started, error) {
	began := time.Now()
	if o.Now == nil {
		o.Now = time.Now
	}
	if _, err := os.Stat(vm.Dir); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("the standby of %s: no directory %s (replicate it first: coffer replicas run)", vm.Name, vm.Dir)
	}
	lock, err := replica.LockRun(vm.Dir)
	if err != nil {
		return nil, err
	}
	defer func() { _ = lock.Close() }() // the record is saved before
	st, err := replica.LoadState(vm.Dir)
	if err != nil {
		return nil, err
	}
	def, pt, err := loadStandby(vm, o.Seq)
	if err != nil {
		return nil, err
	}
	if vm.Domain == nil && def.Config.Kind != "qemu" {
		return nil, fmt.Errorf("the standby of %s is a %s domain: it fails over through its replication's connection (coffer failover run)", vm.Name, def.Config.Kind)
	}
	runDir := filepath.Join(vm.Dir, runDirName)
	out := &Started{VM: vm.Name, Dir: runDir}
	if fo := st.FailedOver; fo != nil {
		if running, err := runningVM(ctx, vm, fo); err != nil || running != "" {
			return nil, errors.Join(err, alreadyFailedOver(vm, fo, running))
		}
		out.Resumed = true
		out.Seq, out.BackupPoint = fo.Seq, fo.BackupPoint
		if _, pt, err = loadStandby(vm, fo.Seq); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(fo.RunDir, 0o700); err != nil {
			return nil, err
		}
		if err := createOverlays(ctx, vm, fo, pt); err != nil {
			return nil, err
		}
		return out, launchFailedOver(ctx, vm, def, fo, out, began)
	}
	if err := os.RemoveAll(runDir); err != nil { // a failback's leftover
		return nil, err
	}
	fo := &replica.FailedOver{Seq: pt.seq, BackupPoint: pt.backupPoint, At: o.Now().UTC(), Planned: o.Planned,
		Overlays: map[string]string{}, RunDir: runDir}
	for k := range pt.disks {
		if fo.Overlays[k], err = overlayFile(vm, runDir, k); err != nil {
			return nil, err
		}
	}
	if err := removeOverlays(fo); err != nil { // a killed failback's leftover active files
		return nil, err
	}
	st.FailedOver = fo
	if err := replica.SaveState(vm.Dir, st); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		return nil, err
	}
	if err := createOverlays(ctx, vm, fo, pt); err != nil {
		return nil, err
	}
	out.Seq, out.BackupPoint = fo.Seq, fo.BackupPoint
	return out, launchFailedOver(ctx, vm, def, fo, out, began)
}

func alreadyFailedOver(vm VM, fo *replica.FailedOver, running string) error {
	if running == "" {
		return nil
	}
	return fmt.Errorf("%w: %s (%s, point %d since %s)", ErrAlreadyFailedOver, vm.Name, running, fo.Seq, fo.At.Format(time.RFC3339))
}

// launchFailedOver starts the failed-over VM on fo's overlays: the
// standby's domain through its hypervisor, else QEMU as a process of
// coffer's.
func launchFailedOver(ctx context.Context, vm VM, def *replica.Definition, fo *replica.FailedOver, out *Started, began time.Time) error {
	if vm.Domain != nil {
		if err := vm.Domain.Start(ctx); err != nil {
			return fmt.Errorf("start the standby domain of %s: %w", vm.Name, err)
		}
		out.Duration, out.machine = time.Since(began), &machine{dir: vm.Dir}
		return nil
	}
	m, err := start(ctx, launch{def: def, dir: fo.RunDir, disk: fo.Overlays})
	if err != nil {
		return err
	}
	out.PID, out.Duration, out.machine = m.pid, time.Since(began), m
	return os.WriteFile(filepath.Join(fo.RunDir, pidName), []byte(strconv.Itoa(m.pid)), 0o600)
}

// runningPID is the failed-over QEMU of runDir when it still runs, else 0.
func runningPID(runDir string) int {
	b, err := os.ReadFile(filepath.Join(runDir, pidName))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(string(b))
	if pid > 0 && alive(pid, runDir) {
		return pid
	}
	return 0
}

// StopFailedOver stops the VM a failover started (before a failback):
// its standby domain, or its QEMU, waiting until it is gone.
func StopFailedOver(ctx context.Context, vm VM, grace time.Duration) error {
	st, err := replica.LoadState(vm.Dir)
	if err != nil {
		return err
	}
	if st.FailedOver == nil {
		return fmt.Errorf("the standby of %s is not failed over", vm.Name)
	}
	if vm.Domain != nil {
		return vm.Domain.Stop(ctx)
	}
	pid := runningPID(st.FailedOver.RunDir)
	if pid == 0 {
		return nil
	}
	m := &machine{dir: st.FailedOver.RunDir, pid: pid, qmpPath: filepath.Join(st.FailedOver.RunDir, "qmp.sock")}
	return m.stop(ctx, grace)
}

// ErrNotFinal refuses a planned failover whose standby does not equal the
// source's final point.
var ErrNotFinal = errors.New("the standby's newest point is not the source's final point")

// Planned is the switch of a planned failover (a migration): the caller
// has shut the source down, backed it up a last time (finalPoint) and
// replicated that point; the standby's newest point must be it, so that
// nothing written at the source is left behind. The failback then moves
// only what the DR VM wrote.
func Planned(ctx context.Context, vm VM, finalPoint string, o Options) (*Started, error) {
	st, err := replica.LoadState(vm.Dir)
	if err != nil {
		return nil, err
	}
	if n := st.Newest(); n == nil || n.BackupPoint != finalPoint {
		have := "none"
		if n != nil {
			have = n.BackupPoint
		}
		return nil, fmt.Errorf("%w: %s has %s, the final point is %s: replicate it first", ErrNotFinal, vm.Name, have, finalPoint)
	}
	o.Seq, o.Planned = 0, true
	return Failover(ctx, vm, o)
}
