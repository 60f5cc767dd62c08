package failover

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"github.com/coffer-backup/coffer/internal/replica"
)

// StandbyDomain is a standby defined as a domain of the DR host's
// hypervisor (libvirt, internal/service/replicaops defines it at each
// replication run). Its disks name replica.ActiveFile files, which only a
// failover creates: a failover makes them (overlays above the chosen
// point), then starts the domain through the hypervisor; a failback stops
// it and removes them, so that the domain again cannot start by accident.
type StandbyDomain interface {
	Start(ctx context.Context) error
	// Stop ends the domain at once (the QEMU path's quit); a shut-off
	// domain is left as it is.
	Stop(ctx context.Context) error
	// Running says whether the domain is active (running or paused).
	Running(ctx context.Context) (bool, error)
}

// overlayFile is where the failed-over VM's writable overlay of disk key
// goes: the file a standby domain's disk names, else in the run directory.
func overlayFile(vm VM, runDir, key string) (string, error) {
	if vm.Domain == nil {
		return filepath.Join(runDir, "disk-"+fileName(key)+".qcow2"), nil
	}
	dir, err := filepath.Abs(vm.Dir) // as the domain's definition names it
	if err != nil {
		return "", err
	}
	return replica.ActiveFile(dir, key), nil
}

// runningVM describes the failed-over VM of fo when it still runs ("" when not).
func runningVM(ctx context.Context, vm VM, fo *replica.FailedOver) (string, error) {
	if vm.Domain != nil {
		running, err := vm.Domain.Running(ctx)
		if err != nil || !running {
			return "", err
		}
		return "its domain is active", nil
	}
	if pid := runningPID(fo.RunDir); pid > 0 {
		return fmt.Sprintf("pid %d", pid), nil
	}
	return "", nil
}

// createOverlays creates the overlays of fo that are missing, above the
// point's disks: all of them at a first failover, the ones a killed
// failover did not get to when it is finished. Existing ones hold the DR
// site's writes and are kept.
func createOverlays(ctx context.Context, vm VM, fo *replica.FailedOver, pt pointRef) error {
	for k, file := range fo.Overlays {
		if _, err := os.Stat(file); err == nil {
			continue
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		backing, ok := pt.disks[k]
		if !ok {
			return fmt.Errorf("the standby of %s: point %d has no disk %s", vm.Name, pt.seq, k)
		}
		tmp := file + ".tmp"
		if err := createOverlay(ctx, tmp, backing); err != nil {
			return err
		}
		if vm.Domain != nil {
			if err := giveToDirOwner(tmp); err != nil {
				return err
			}
		}
		if err := os.Rename(tmp, file); err != nil { // whole or absent: a kill leaves no half-made overlay
			return err
		}
	}
	return nil
}

// giveToDirOwner gives file to the owner of its directory when coffer
// runs as root: the hypervisor that writes the active overlay (a libvirt
// daemon's QEMU, under its own user) owns the standby directory it keeps.
func giveToDirOwner(file string) error {
	if os.Geteuid() != 0 {
		return nil
	}
	fi, err := os.Stat(filepath.Dir(file))
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Uid == 0 {
		return nil
	}
	return os.Chown(file, int(st.Uid), int(st.Gid))
}

// removeOverlays removes a failback's overlays (the active files of a
// standby domain lie outside the run directory).
func removeOverlays(fo *replica.FailedOver) error {
	var errs []error
	for _, file := range fo.Overlays {
		if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
