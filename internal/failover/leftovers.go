package failover

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// runLockName is the lock a test failover holds on its run directory for
// its whole life: RemoveLeftovers takes a run directory whose lock it
// can take for a killed run's, and leaves a live run alone (a server
// starting while `coffer failover test` runs, or two tests at once). The
// kernel drops the lock when its process dies, kill -9 included; QEMU
// does not inherit it (Go opens files close-on-exec).
const runLockName = "run.lock"

// lockRunDir takes the run lock of dir; ok is false when another process
// (or another run of this one) holds it.
func lockRunDir(dir string) (f *os.File, ok bool, err error) {
	f, err = os.OpenFile(filepath.Join(dir, runLockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, err
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		_ = f.Close() // the lock's error is the one that matters
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			return nil, false, nil
		}
		return nil, false, err
	}
	return f, true, nil
}

// RemoveLeftovers stops the VMs of test failovers a killed coffer left
// and removes their run directories (overlays, sockets, the VMs'
// isolated networks go with their QEMU). A server runs it at start, and
// every test failover before its own; a run still going elsewhere holds
// its run lock and is left alone.
func RemoveLeftovers(ctx context.Context, stateDir string, log *slog.Logger) {
	RemoveLeftoversOf(ctx, stateDir, nil, log)
}

// RemoveLeftoversOf is RemoveLeftovers that also ends the copies of
// standby domains a killed run started on its hypervisor, through
// destroy, and removes their overlays. A run whose copy could not be
// ended is left whole, for the next clean-up.
func RemoveLeftoversOf(ctx context.Context, stateDir string, destroy CopyDestroyer, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	runs, _ := filepath.Glob(filepath.Join(rehearsalRoot(stateDir), "*"))
	for _, run := range runs {
		lock, ok, err := lockRunDir(run)
		if err != nil || !ok {
			continue // a live run's, or not one of ours
		}
		if err := removeCopies(ctx, run, destroy); err != nil {
			_ = lock.Close() // the run is kept: a later clean-up tries again
			log.Warn("test failover leftover not removed", "dir", run, "err", err)
			continue
		}
		vms, _ := filepath.Glob(filepath.Join(run, "*"))
		stopped := 0
		for _, d := range vms {
			d = socketDirOf(d)
			if pid := readPID(d); pid > 0 && alive(pid, d) {
				_ = (&machine{dir: d, pid: pid, qmpPath: filepath.Join(d, "qmp.sock")}).stop(ctx, 5*time.Second)
				stopped++
			}
		}
		err = errors.Join(removeSocketDirs(run), os.RemoveAll(run))
		_ = lock.Close() // its file is gone with the directory
		if err != nil {
			log.Warn("test failover leftover not removed", "dir", run, "err", err)
			continue
		}
		log.Info("removed the leftover of a killed test failover", "dir", run, "vms_stopped", stopped)
	}
}
