package cli

import (
	"context"
	"fmt"

	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/restore"
)

// restoreCacheBytes bounds the chunk cache of each disk being uploaded: the
// connector reads a disk in order, so a few chunks ahead are enough.
const restoreCacheBytes = 64 << 20

type restoreVMConnectionResult struct {
	Snapshot   string   `json:"snapshot"`
	Connection string   `json:"connection"`
	VM         string   `json:"vm"`
	VMID       string   `json:"vm_id"`
	Original   bool     `json:"onto_original"`
	Disks      []string `json:"disks"`
	Started    bool     `json:"started"`
	Warnings   []string `json:"warnings,omitempty"`
}

// runRestoreVMOnConnection restores a backup point through a hypervisor
// connection of the configuration (vSphere today): the connector creates
// the VM from the configuration recorded at backup time (or, with
// --onto-original and its confirmation, takes the powered-off original) and
// each disk's allocated ranges stream into it straight from the repository.
// A half-restored new VM is deleted when anything fails.
func (a *app) runRestoreVMOnConnection(ctx context.Context, r *repo.Repository, s *repo.Snapshot, cfg hypervisor.VMConfig, o restoreVMOptions) error {
	if o.ontoOriginal && !o.confirmOverwrite {
		return usagef("--onto-original overwrites the disks of VM %s with backup point %s: add --yes-overwrite-original to confirm", cfg.Name, s.ID.Short())
	}
	pc, err := a.engineConfig()
	if err != nil {
		return err
	}
	conns, _, err := a.openConnectors(ctx, pc, []string{o.connection})
	if err != nil {
		return err
	}
	c := conns[o.connection]
	if c.Kind() != cfg.Kind {
		return usagef("backup point %s is of a %s VM; connection %s is %s", s.ID.Short(), cfg.Kind, o.connection, c.Kind())
	}
	restorer, ok := c.(hypervisor.Restorer)
	if !ok {
		return usagef("connection %s (%s) cannot create VMs", o.connection, c.Kind())
	}
	name := o.name
	if name == "" && !o.ontoOriginal {
		name = cfg.Name + "-restored"
	}
	nv, err := restorer.CreateVM(ctx, cfg, hypervisor.NewVMOptions{Name: name, Datastore: o.datastore, ReplaceExisting: o.ontoOriginal})
	if err != nil {
		return err
	}
	res := restoreVMConnectionResult{Snapshot: s.ID.String(), Connection: o.connection, VM: nv.Ref().Name, VMID: nv.Ref().ID, Original: o.ontoOriginal}
	fail := func(err error) error {
		// Abort deletes a VM this command created; on the original it
		// only releases what the restore held.
		if aerr := nv.Abort(context.WithoutCancel(ctx)); aerr != nil {
			a.log.Warn("could not remove the half-restored VM", "vm", res.VM, "err", aerr)
		}
		return err
	}
	for _, d := range s.Disks {
		if d.Kind == hypervisor.KindMemory {
			res.Warnings = append(res.Warnings, "the point holds the VM's memory state; this connection restores disks only, so the VM boots")
			continue
		}
		src, err := restore.OpenDisk(ctx, r, d, restore.CacheChunks(restoreCacheBytes, d.ChunkSize))
		if err != nil {
			return fail(err)
		}
		a.log.Info("writing disk", "vm", res.VM, "disk", d.Name, "bytes", d.Size)
		if err := nv.WriteDisk(ctx, d.Key, src); err != nil {
			return fail(fmt.Errorf("disk %s: %w", d.Name, err))
		}
		res.Disks = append(res.Disks, d.Name)
	}
	if o.start {
		if err := nv.Start(ctx); err != nil {
			return err
		}
		res.Started = true
	}
	if a.jsonOut {
		return a.printJSON(res)
	}
	for _, w := range res.Warnings {
		a.printf("warning: %s\n", w)
	}
	what := "restored VM " + res.VM
	if res.Original {
		what = "restored the disks of VM " + res.VM
	}
	a.printf("%s on %s (from %s, snapshot %s): %d disk(s)", what, o.connection, cfg.Name, s.ID.Short(), len(res.Disks))
	if res.Started {
		a.printf(", powered on")
	}
	a.printf("\n")
	return nil
}
