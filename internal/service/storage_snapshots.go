package service

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
	"github.com/coffer-backup/coffer/internal/offload"
	"github.com/coffer-backup/coffer/internal/restore"
	"github.com/coffer-backup/coffer/internal/storagesnap"
	"github.com/coffer-backup/coffer/internal/task"
)

// Storage snapshots that policies keep (keep-storage-snapshots) are
// restore points on the datastore itself, listed beside the repository's
// points; internal/storagesnap keeps, lists, restores and deletes them.

// StorageSnapshotsInput filters the kept storage snapshots.
type StorageSnapshotsInput struct {
	Policy string
	// VM keeps the snapshots that hold this VM (name or ID).
	VM string
}

// StorageSnapshots lists the storage snapshots policies keep, oldest
// first.
func (s *Service) StorageSnapshots(_ context.Context, in StorageSnapshotsInput) ([]api.StorageSnapshot, error) {
	kept, err := storagesnap.List(s.cfg.StateDir)
	if err != nil {
		return nil, err
	}
	out := []api.StorageSnapshot{}
	for _, k := range kept {
		if in.Policy != "" && k.Policy != in.Policy {
			continue
		}
		doc := storageSnapshotDoc(k)
		if in.VM != "" && !holdsVM(doc, in.VM) {
			continue
		}
		out = append(out, doc)
	}
	return out, nil
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

// StorageRestoreInput restores one VM's disks from a kept storage
// snapshot.
type StorageRestoreInput struct {
	Label string
	VM    string
	// Target is the directory the disk files are made in, each named as
	// the original; on the datastore's filesystem they are clones.
	Target    string
	Overwrite bool
	// NoOffload copies through coffer even where the filesystem clones.
	NoOffload bool
	// OntoOriginal replaces the VM's own disk files instead (Target is
	// then empty); ConfirmOverwrite must say so too.
	OntoOriginal, ConfirmOverwrite bool
}

// RestoreFromStorage makes a VM's disk files again from a kept storage
// snapshot: clones where the target shares the datastore's filesystem,
// so a VM of any size is back in seconds, without the repository.
func (s *Service) RestoreFromStorage(ctx context.Context, in StorageRestoreInput) (*api.StorageRestore, error) {
	switch {
	case in.Label == "" || in.VM == "":
		return nil, invalidf("name the storage snapshot (its label) and the VM to restore from it")
	case in.OntoOriginal && in.Target != "":
		return nil, invalidf("--onto-original puts the disks back where they were: give no --target")
	case in.OntoOriginal && !in.ConfirmOverwrite:
		return nil, invalidf("--onto-original replaces %s's disk files with the snapshot's: add --yes-overwrite-original to confirm", in.VM)
	case !in.OntoOriginal && (in.Target == "" || !filepath.IsAbs(in.Target)):
		return nil, invalidf("--target must be an absolute directory, not %q (or --onto-original)", in.Target)
	}
	spec := TaskSpec{Kind: task.KindRestore, Object: auth.ConnectionsPath, VM: in.VM, Detail: "storage snapshot " + in.Label}
	return run(ctx, s, spec, func(ctx context.Context, t Task) (*api.StorageRestore, error) {
		o := offload.CopyOptions{Overwrite: in.Overwrite, NoOffload: in.NoOffload}
		var got []storagesnap.RestoredDisk
		var err error
		if in.OntoOriginal {
			got, err = storagesnap.RestoreOntoOriginal(ctx, s.cfg.StateDir, in.Label, in.VM, o)
		} else {
			// The directory is made as restore-vm makes its own: the API's
			// callers name a new one under the restore directory.
			if err := os.MkdirAll(in.Target, 0o700); err != nil {
				return nil, err
			}
			got, err = storagesnap.Restore(ctx, s.cfg.StateDir, in.Label, in.VM, in.Target, o)
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
func (s *Service) ForgetStorageSnapshot(ctx context.Context, label string) (*api.StorageSnapshot, error) {
	k, err := storagesnap.Forget(ctx, s.cfg.StateDir, label)
	if err != nil {
		return nil, err
	}
	doc := storageSnapshotDoc(k)
	return &doc, nil
}
