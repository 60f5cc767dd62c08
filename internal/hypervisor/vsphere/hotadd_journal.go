package vsphere

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/vsphere/moverdev"
	"github.com/coffer-backup/coffer/internal/statefile"
)

// hotAddJournal records one attachment before it is requested.
type hotAddJournal struct {
	path    string
	ID      string    `json:"id"`
	StateID string    `json:"state_id"`
	PID     int       `json:"coffer_pid"`
	Mover   string    `json:"data_mover"` // MoRef value
	VM      string    `json:"vm"`         // the VM whose disk it is
	File    string    `json:"file"`       // backing file attached
	Created time.Time `json:"created"`
}

func hotAddDir(stateDir string) string { return filepath.Join(stateDir, "hotadd") }

// cleanupHotAdds detaches what killed coffers attached to their data
// movers (journals of processes that are gone), before their snapshots
// are removed: a base disk still attached elsewhere would block the
// consolidation.
func (c *Connector) cleanupHotAdds(ctx context.Context) ([]hypervisor.Leftover, []error) {
	files, err := statefile.ReadAll[hotAddJournal](hotAddDir(c.cfg.StateDir))
	var out []hypervisor.Leftover
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	for _, f := range files {
		j := f.Value
		j.path = f.Path
		if _, live := liveHotAdds.Load(j.ID); j.PID == os.Getpid() && live || j.PID != os.Getpid() && statefile.ProcessAlive(j.PID) {
			continue
		}
		if j.StateID != c.stateID {
			continue // another installation's journal in a shared directory: not ours to act on
		}
		n, err := c.detach(ctx, types.ManagedObjectReference{Type: "VirtualMachine", Value: j.Mover}, j.File)
		if err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("vsphere: cleanup: detach %s from data mover %s: %w", j.File, j.Mover, err))
			continue
		}
		if n > 0 {
			out = append(out, hypervisor.Leftover{VM: hypervisor.VMRef{ID: j.VM}, Kind: "hot-added-disk", Name: j.File,
				Action: "detached from data-mover VM " + j.Mover})
		}
		if err := statefile.Remove(j.path); err != nil {
			errs = append(errs, err)
		}
	}
	return out, errs
}

func (j *hotAddJournal) save() error {
	if err := statefile.WriteJSON(j.path, j); err != nil {
		return fmt.Errorf("vsphere: hot-add journal: %w", err)
	}
	return nil
}

// liveHotAdds are the attachments of this process still open.
var liveHotAdds sync.Map

// LinuxDevices finds an attached disk in a Linux data mover by its UUID
// (moverdev.ByUUID).
type LinuxDevices struct{}

func (LinuxDevices) Device(ctx context.Context, d AttachedDisk) (string, error) {
	return moverdev.ByUUID(ctx, d.UUID)
}
