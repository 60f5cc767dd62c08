package service

import (
	"context"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/auth"
)

// The endpoints of the storage snapshots policies keep as restore points.

type storageSnapshotsIn struct {
	Policy string `query:"policy" maxLength:"255" doc:"only this policy's"`
	VM     string `query:"vm" maxLength:"255" doc:"only those holding this VM (name or ID)"`
}

// epStorageSnapshots lists the kept storage snapshots of the policies the
// caller audits.
func epStorageSnapshots(ctx context.Context, s *Service, in *storageSnapshotsIn) (*Result[[]api.StorageSnapshot], error) {
	all, err := s.StorageSnapshots(ctx, StorageSnapshotsInput{Policy: in.Policy, VM: in.VM})
	if err != nil {
		return nil, err
	}
	return result(visible(ctx, s, auth.PolicyAudit, all, func(k api.StorageSnapshot) []string {
		return []string{auth.PolicyPath(k.Policy)}
	}), nil)
}

// LabelParam is the label of a kept storage snapshot.
// (Exported: huma reads the parameters of embedded structs only when
// their type is exported.)
type LabelParam struct {
	Label string `path:"label" minLength:"8" maxLength:"207" pattern:"^coffer-[A-Za-z0-9._-]+$" doc:"the storage snapshot's label"`
}

type storageRestoreIn struct {
	LabelParam
	Body api.StorageRestoreRequest
}

func epRestoreFromStorage(ctx context.Context, s *Service, in *storageRestoreIn) (*Result[*api.StorageRestore], error) {
	b := in.Body
	to := ""
	if !b.OntoOriginal {
		var err error
		if to, err = confine(s.cfg.Files.RestoreDir, restoreDir, b.To); err != nil {
			return nil, err
		}
	}
	return result(s.RestoreFromStorage(ctx, StorageRestoreInput{Label: in.Label, VM: b.VM, Target: to, Overwrite: b.Overwrite, NoOffload: b.NoOffload,
		OntoOriginal: b.OntoOriginal, ConfirmOverwrite: b.ConfirmOverwrite}))
}

func epForgetStorageSnapshot(ctx context.Context, s *Service, in *LabelParam) (*Result[*api.StorageSnapshot], error) {
	return result(s.ForgetStorageSnapshot(ctx, in.Label))
}
