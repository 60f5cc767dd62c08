package backupops

import (
	"github.com/coffer-backup/coffer/internal/service"
	"github.com/coffer-backup/coffer/internal/service/apidoc"

	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
)

// BackupDisk backs up raw disk images or block devices into the default
// repository as one backup point, the disks of one machine, and records
// the point in the catalog. No snapshot is taken: an image is read as it
// is, so the point achieves "as-is". The source's name defaults to the
// first file's; a server reads images from its image directory only.
func (s Ops) BackupDisk(ctx context.Context, call *api.BackupDiskInput) (*api.BackupPoint, error) {
	in := call.Body
	in.Paths = nil
	for _, p := range call.Body.Paths {
		full, err := s.HostPath(s.Config.Files.ImageDir, "image directory (server.image-dir)", p)
		if err != nil {
			return nil, err
		}
		in.Paths = append(in.Paths, full)
	}
	if len(in.Paths) == 0 {
		return nil, service.Invalidf("no disk image given")
	}
	if in.Name == "" {
		in.Name = filepath.Base(in.Paths[0])
	}
	return service.Run(ctx, s.Service, service.WithDetail(s.RepoJob(service.KindBackupDiskJob, s.Config.Repository.Location), in.Name), func(ctx context.Context, t service.Job) (*api.BackupPoint, error) {
		return service.WithRepo(ctx, s.Service, service.DefaultRepo(), service.NoLease, func(r *repo.Repository) (*api.BackupPoint, error) {
			src := repo.Source{Kind: "disk", VMName: in.Name}
			snaps, err := r.Points(ctx, nil)
			if err != nil {
				return nil, err
			}
			parent := backup.Latest(snaps, src, nil)
			var disks []backup.Disk
			var files []*backup.FileSource
			defer func() {
				for _, f := range files {
					_ = f.Close() // read only: a close loses nothing
				}
			}()
			for i, p := range in.Paths {
				f, err := backup.OpenFile(p)
				if err != nil {
					return nil, fmt.Errorf("%w: %w", backup.ErrSourceChanged, err)
				}
				files = append(files, f)
				alloc, err := f.Allocated()
				if err != nil {
					return nil, err
				}
				key := fmt.Sprint(i)
				prev, err := backup.PreviousMap(ctx, r, parent, key, f.Size())
				if err != nil {
					return nil, fmt.Errorf("previous backup of %s: %w", p, err)
				}
				mode := "full"
				if prev != nil {
					mode = "compared"
				}
				abs, _ := filepath.Abs(p)
				disks = append(disks, backup.Disk{Key: key, Name: filepath.Base(p), Path: abs, Format: "raw", Reader: f,
					Size: f.Size(), Allocated: alloc, Previous: prev, Mode: mode})
			}
			mode := "full"
			if parent != nil {
				mode = "incremental"
			}
			if err := canLock(r, in.LockedUntil, "--immutable-for"); err != nil {
				return nil, err
			}
			w, err := r.NewWriter(ctx, "backup disk "+in.Name)
			if err != nil {
				return nil, err
			}
			prog := &backup.Progress{}
			t.Progress(service.Meter{Label: "backup " + in.Name, Done: prog.BytesDone.Load, Total: prog.BytesTotal.Load, Detail: storedDetail(prog)})
			unchanged := func() error {
				for _, f := range files {
					if err := f.CheckUnchanged(); err != nil {
						return err
					}
				}
				return nil
			}
			snap, err := backup.Run(ctx, w, backup.Request{Source: src, Mode: mode, Parent: parent, Tags: in.Tags, Disks: disks,
				SnapshotModeAchieved: string(hypervisor.AsIs), BeforeCommit: unchanged, RetainUntil: in.LockedUntil}, backup.Options{Progress: prog})
			return s.committed(ctx, t, r, w, snap, err)
		})
	})
}

// committed closes a backup's writer and, when the backup committed a
// point, records it in the catalog and returns its document.
func (s Ops) committed(ctx context.Context, t service.Job, r *repo.Repository, w *repo.Writer, snap *repo.Point, err error) (*api.BackupPoint, error) {
	cerr := w.Close(ctx)
	if err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, cerr
	}
	if warning := s.RecordPoint(ctx, r, snap); warning != "" {
		t.Log(slog.LevelWarn, warning)
	}
	p := apidoc.PointDoc(r.Config().ID, snap)
	return &p, nil
}

// canLock refuses a lock the repository's storage cannot enforce.
func canLock(r *repo.Repository, until time.Time, what string) error {
	if !until.IsZero() && !r.Store().Properties().Retention {
		return service.Invalidf("%s needs storage with retention (S3 Object Lock); %s has none", what, r.Store().Properties().Location)
	}
	return nil
}

func storedDetail(prog *backup.Progress) func() string {
	return func() string { return "new " + config.HumanBytes(prog.BytesNew.Load()) }
}
