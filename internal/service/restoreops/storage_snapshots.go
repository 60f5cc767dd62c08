package restoreops

import (
	"github.com/coffer-backup/coffer/internal/service"

	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/job"
	"github.com/coffer-backup/coffer/internal/offload"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/storagesnap"
)

// Storage snapshots that policies keep (keep-storage-snapshots) are
// restore points on the datastore itself, listed beside the repository's
// points; internal/storagesnap keeps, lists, restores and deletes them.

// StorageSnapshots lists the storage snapshots policies keep, oldest
// first: those of the policies the caller audits.
func (s Ops) StorageSnapshots(ctx context.Context, in *api.ListStorageSnapshotsInput) ([]api.StorageSnapshot, error) {
	all, err := s.storageSnapshots(ctx, in)
	if err != nil {
		return nil, err
	}
	return service.Visible(ctx, s.Service, auth.PolicyAudit, all, func(k api.StorageSnapshot) []string {
		return []string{auth.PolicyPath(k.Policy)}
	}), nil
}

func (s Ops) storageSnapshots(ctx context.Context, in *api.ListStorageSnapshotsInput) ([]api.StorageSnapshot, error) {
	kept, err := storagesnap.List(s.Config.StateDir)
	if err != nil {
		return nil, err
	}
	// A configuration that does not load marks nothing orphaned: the list
	// is what one looks at to mend it.
	cfg, cfgErr := s.EngineConfig(ctx)
	out := []api.StorageSnapshot{}
	for _, k := range kept {
		if in.Policy != "" && k.Policy != in.Policy {
			continue
		}
		doc := storageSnapshotDoc(k)
		if in.VM != "" && !holdsVM(doc, in.VM) {
			continue
		}
		if cfgErr == nil {
			doc.Orphaned = orphaned(cfg, k)
		}
		out = append(out, doc)
	}
	return out, nil
}

// orphaned says why no run of a policy will delete a kept snapshot: the
// policy's runs apply its keep-storage-snapshots to the snapshots it kept
// on its connections (storagesnap.RetainKept), so one whose policy was
// removed, or renamed, or no longer runs on its connection (or whose
// connection lost its storage-snapshots provider) stays until an operator
// forgets it. coffer does not delete it on its own: the snapshot
// may be the last fast restore point of VMs that a removed policy
// protected. Empty when a run will apply retention to it.
func orphaned(cfg *policy.Config, k storagesnap.Kept) string {
	forget := fmt.Sprintf("`coffer storage-snapshots forget %s` deletes it", k.Label)
	p, ok := cfg.Policy(k.Policy)
	switch {
	case !ok:
		return fmt.Sprintf("policy %s is no longer in the configuration, so no run deletes this snapshot: %s", k.Policy, forget)
	case !slices.Contains(p.ConnectionNames(), k.Connection):
		return fmt.Sprintf("policy %s no longer runs on connection %s, so no run deletes this snapshot: %s", k.Policy, k.Connection, forget)
	case !slices.ContainsFunc(cfg.StorageSnapshots, func(sp policy.StorageProvider) bool { return slices.Contains(sp.Connections, k.Connection) }):
		return fmt.Sprintf("no storage-snapshots provider covers connection %s any more, so no run deletes this snapshot: %s", k.Connection, forget)
	}
	return ""
}

func storageSnapshotDoc(k storagesnap.Kept) api.StorageSnapshot {
	doc := api.StorageSnapshot{Label: k.Label, Policy: k.Policy, Connection: k.Connection, Datastore: k.Datastore, Provider: k.Provider,
		Kind: k.Kind, Time: k.Created, JobID: k.JobID, SnapshotMode: k.SnapshotMode, VMs: []api.StorageSnapshotVM{}}
	for _, v := range k.VMs {
		vm := api.StorageSnapshotVM{VM: v.Name, VMID: v.ID, Disks: []string{}}
		for _, d := range v.Disks {
			vm.Disks = append(vm.Disks, d.Path)
		}
		doc.VMs = append(doc.VMs, vm)
	}
	return doc
}

func holdsVM(doc api.StorageSnapshot, vm string) bool {
	for _, v := range doc.VMs {
		if v.VM == vm || v.VMID == vm {
			return true
		}
	}
	return false
}

// storageRestore is a restore from a storage snapshot with its target
// directory on this host.
type storageRestore struct {
	api.StorageRestoreRequest
	Label, Target string
}

// RestoreFromStorage makes a VM's disk files again from a kept storage
// snapshot: clones where the target shares the datastore's filesystem,
// so a VM of any size is back in seconds, without the repository. The
// disk files are made in the directory To, each named as the original
// (a server's: under its restore directory), or with OntoOriginal (and
// ConfirmOverwrite) they replace the VM's own.
func (s Ops) RestoreFromStorage(ctx context.Context, call *api.RestoreStorageSnapshotInput) (*api.StorageRestore, error) {
	in := storageRestore{StorageRestoreRequest: call.Body, Label: call.Label}
	if !in.OntoOriginal {
		var err error
		if in.Target, err = s.HostPath(s.Config.Files.RestoreDir, service.RestoreDir, in.To); err != nil {
			return nil, err
		}
	} else if s.Config.Local {
		in.Target = in.To // refused below: onto the original takes no directory
	}
	stateDir, err := s.shippedOrKept(ctx, in.From)
	if err != nil {
		return nil, err
	}
	switch {
	case in.From != "" && in.OntoOriginal:
		return nil, service.Invalidf("--from restores from a shipped copy into --target: not onto the original")
	case in.Label == "" || in.VM == "":
		return nil, service.Invalidf("name the storage snapshot (its label) and the VM to restore from it")
	case in.OntoOriginal && in.Target != "":
		return nil, service.Invalidf("--onto-original puts the disks back where they were: give no --target")
	case in.OntoOriginal && !in.ConfirmOverwrite:
		return nil, service.Invalidf("--onto-original replaces %s's disk files with the snapshot's: add --yes-overwrite-original to confirm", in.VM)
	case !in.OntoOriginal && (in.Target == "" || !filepath.IsAbs(in.Target)):
		return nil, service.Invalidf("--target must be an absolute directory, not %q (or --onto-original)", in.Target)
	}
	spec := service.JobSpec{Kind: job.KindRestore, Object: auth.ConnectionsPath, VM: in.VM, Detail: "storage snapshot " + in.Label}
	return service.Run(ctx, s.Service, spec, func(ctx context.Context, t service.Job) (*api.StorageRestore, error) {
		o := offload.CopyOptions{Overwrite: in.Overwrite, NoOffload: in.NoOffload}
		var got []storagesnap.RestoredDisk
		var err error
		if in.OntoOriginal {
			got, err = storagesnap.RestoreOntoOriginal(ctx, stateDir, in.Label, in.VM, o)
		} else {
			// The directory is made as restore-vm makes its own: the API's
			// callers name a new one under the restore directory.
			if err := os.MkdirAll(in.Target, 0o700); err != nil {
				return nil, err
			}
			got, err = storagesnap.Restore(ctx, stateDir, in.Label, in.VM, in.Target, o)
		}
		if errors.Is(err, offload.ErrTargetExists) {
			err = fmt.Errorf("%w (use --overwrite to replace it): %w", restore.ErrTargetExists, err)
		}
		if errors.Is(err, syscall.ENOSPC) {
			err = fmt.Errorf("%w: %w", restore.ErrTargetFull, err)
		}
		if err != nil && len(got) > 0 {
			// Say what is done: onto the original, those disks are the
			// snapshot's already.
			var done []string
			for _, d := range got {
				done = append(done, d.Target)
			}
			err = fmt.Errorf("%w (already restored: %s)", err, strings.Join(done, ", "))
		}
		if err != nil {
			return nil, err
		}
		out := &api.StorageRestore{Label: in.Label, VM: in.VM, Disks: []api.StorageRestoredDisk{}}
		for _, d := range got {
			s.reportCopy(t, d.Disk.Name, d.Target, d.CopyStats)
			out.Disks = append(out.Disks, api.StorageRestoredDisk{Disk: d.Disk.Name, Source: d.Disk.Path, Target: d.Target,
				Method: string(d.Method), DataBytes: d.DataBytes, Seconds: d.Took.Seconds()})
		}
		return out, nil
	})
}

// ForgetStorageSnapshot deletes a kept storage snapshot before its
// policy's retention would.
func (s Ops) ForgetStorageSnapshot(ctx context.Context, in *api.ForgetStorageSnapshotInput) (*api.StorageSnapshot, error) {
	k, err := storagesnap.Forget(ctx, s.Config.StateDir, in.Label)
	if err != nil {
		return nil, err
	}
	doc := storageSnapshotDoc(k)
	return &doc, nil
}
