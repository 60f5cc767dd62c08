package vsphere

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/vim25/types"

	"github.com/coffer-backup/coffer/internal/hypervisor"
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

// LinuxDevices finds an attached disk in a Linux data mover: the SCSI
// hosts are rescanned, then the disk shows as /dev/disk/by-id/wwn-0x<its
// UUID> (the VM needs disk.EnableUUID=TRUE, so that the guest sees the
// UUIDs).
type LinuxDevices struct{}

func (LinuxDevices) Device(ctx context.Context, d AttachedDisk) (string, error) {
	if d.UUID == "" {
		return "", errors.New("the attached disk has no UUID")
	}
	p := "/dev/disk/by-id/wwn-0x" + strings.ToLower(strings.ReplaceAll(d.UUID, "-", ""))
	hosts, _ := filepath.Glob("/sys/class/scsi_host/host*/scan")
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, h := range hosts {
			_ = os.WriteFile(h, []byte("- - -"), 0o200)
		}
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%s did not appear (is disk.EnableUUID=TRUE set on the data-mover VM?): %w", p, ctx.Err())
		case <-tick.C:
		}
	}
}
