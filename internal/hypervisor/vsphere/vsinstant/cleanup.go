package vsinstant

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/vmware/govmomi/vim25"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/statefile"
)

// Cleanup removes what recoveries of dead coffer processes left in the
// vCenter: their VM is powered off and unregistered (unless committed)
// and their datastore unmounted, then their directory and journal go.
// Without its server the VM can read nothing, so nothing of it is worth
// keeping; the journals of live processes are left alone.
func Cleanup(ctx context.Context, c *vim25.Client, stateDir string) ([]hypervisor.Leftover, error) {
	recs, err := loadRecords(stateDir)
	if err != nil {
		return nil, err
	}
	var out []hypervisor.Leftover
	var errs []error
	for _, rec := range recs {
		if rec.PID == os.Getpid() || statefile.ProcessAlive(rec.PID) {
			continue // served here or by another coffer
		}
		vm := hypervisor.VMRef{ID: rec.VM, Name: rec.VMName}
		hadVM, hadDS := rec.VM != "" && !rec.Committed, rec.DatastoreID != ""
		if err := discard(ctx, c, rec); err != nil {
			errs = append(errs, fmt.Errorf("vsphere: cleanup of instant recovery %s: %w", rec.Session, err))
			continue
		}
		if hadVM {
			out = append(out, hypervisor.Leftover{VM: vm, Kind: "instant-vm", Name: rec.VMName, Action: "powered off and unregistered"})
		}
		if hadDS {
			out = append(out, hypervisor.Leftover{VM: vm, Kind: "nfs-datastore", Name: rec.Datastore, Action: "unmounted"})
		}
		if rec.Dir != "" {
			if err := os.RemoveAll(rec.Dir); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		if err := rec.remove(); err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}
