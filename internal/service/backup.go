package service

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/qemu"
	"github.com/coffer-backup/coffer/internal/repo"
)

// BackupDiskInput names raw disk images or block devices to back up as
// one backup point: the disks of one machine.
type BackupDiskInput struct {
	Paths []string
	// Name is the source's name (default: the first file's name).
	Name string
	Tags map[string]string
	// LockedUntil locks the point (object lock) until then; zero: no lock.
	LockedUntil time.Time
}

// BackupDisk backs up disk images into the default repository and records
// the point in the catalog. No snapshot is taken: an image is read as it
// is, so the point achieves "as-is".
func (s *Service) BackupDisk(ctx context.Context, in BackupDiskInput) (*api.BackupPoint, error) {
	if len(in.Paths) == 0 {
		return nil, invalidf("no disk image given")
	}
	if in.Name == "" {
		in.Name = filepath.Base(in.Paths[0])
	}
	return run(ctx, s, withDetail(s.repoTask(KindBackupDiskTask, s.cfg.Repository.Location), in.Name), func(ctx context.Context, t Task) (*api.BackupPoint, error) {
		r, err := s.openRepository(ctx)
		if err != nil {
			return nil, err
		}
		src := repo.Source{Kind: "disk", VMName: in.Name}
		snaps, err := r.Snapshots(ctx, nil)
		if err != nil {
			return nil, err
		}
		parent := backup.Latest(snaps, src, nil)
		var disks []backup.Disk
		var files []*backup.FileSource
		defer func() {
			for _, f := range files {
				f.Close()
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
			prev, err := backup.PreviousIDs(ctx, r, parent, key, f.Size())
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
		t.Progress(Meter{Label: "backup " + in.Name, Done: prog.BytesDone.Load, Total: prog.BytesTotal.Load, Detail: storedDetail(prog)})
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
}

// committed closes a backup's writer and, when the backup committed a
// point, records it in the catalog and returns its document.
func (s *Service) committed(ctx context.Context, t Task, r *repo.Repository, w *repo.Writer, snap *repo.Snapshot, err error) (*api.BackupPoint, error) {
	cerr := w.Close(ctx)
	if err != nil {
		return nil, err
	}
	if cerr != nil {
		return nil, cerr
	}
	if warning := s.recordPoint(ctx, r, snap); warning != "" {
		t.Log(slog.LevelWarn, warning)
	}
	p := pointDoc(r.Config().ID, snap)
	return &p, nil
}

// canLock refuses a lock the repository's storage cannot enforce.
func canLock(r *repo.Repository, until time.Time, what string) error {
	if !until.IsZero() && !r.Store().Properties().Retention {
		return invalidf("%s needs storage with retention (S3 Object Lock); %s has none", what, r.Store().Properties().Location)
	}
	return nil
}

func storedDetail(prog *backup.Progress) func() string {
	return func() string { return "new " + config.HumanBytes(prog.BytesNew.Load()) }
}

// BackupQEMUInput is a VM to back up now and how: a running QEMU VM
// reached through a QMP monitor of coffer's own (Socket), or a VM of a
// configured connection (Connection and VM, its name or ID).
type BackupQEMUInput struct {
	Socket         string
	Connection, VM string
	// Mode is full, incremental or differential (the first backup is
	// full whatever it says).
	Mode string
	// SnapshotMode is the VM snapshot mode asked for; Quiesce says what
	// happens without a guest agent (fallback or required).
	SnapshotMode hypervisor.SnapshotMode
	Quiesce      hypervisor.QuiescePolicy
	Tags         map[string]string
	LockedUntil  time.Time
	// NBDConnections per disk (0: 4; a QEMU monitor only).
	NBDConnections int
	// ChangeCheckSpans is how many spans of each disk an incremental
	// reads to check change tracking (0: 8; -1: off).
	ChangeCheckSpans int
}

// BackupQEMU backs up every disk of a running VM at one instant into the
// default repository and records the point in the catalog. Leftovers of a
// killed coffer on the VM's hypervisor are removed first.
func (s *Service) BackupQEMU(ctx context.Context, in BackupQEMUInput) (*api.BackupPoint, error) {
	switch in.Mode {
	case "full", "incremental", "differential":
	default:
		return nil, invalidf("--mode must be full, incremental or differential, not %q", in.Mode)
	}
	switch in.SnapshotMode {
	case hypervisor.CrashConsistent, hypervisor.Quiesced, hypervisor.Suspend, hypervisor.AsIs, hypervisor.WithMemory:
	default:
		return nil, invalidf("unknown --snapshot-mode %q", in.SnapshotMode)
	}
	if in.Quiesce != hypervisor.QuiesceFallback && in.Quiesce != hypervisor.QuiesceRequired {
		return nil, invalidf("--quiesce must be fallback or required")
	}
	if (in.Socket == "") == (in.Connection == "" || in.VM == "") {
		return nil, invalidf("name either a QMP socket or a connection and a VM")
	}
	object := in.Socket
	if in.Connection != "" {
		object = in.Connection + "/" + in.VM
	}
	return run(ctx, s, withDetail(s.repoTask(KindBackupVMTask, s.cfg.Repository.Location), object), func(ctx context.Context, t Task) (*api.BackupPoint, error) {
		conn, connName, err := s.backupConnector(ctx, in)
		if err != nil {
			return nil, err
		}
		if left, err := conn.CleanupLeftovers(ctx); err != nil {
			t.Log(slog.LevelWarn, "cleanup of earlier sessions failed", "err", err)
		} else {
			for _, l := range left {
				t.Log(slog.LevelInfo, "cleaned up leftover of a killed coffer", "vm", l.VM.Name, "kind", l.Kind, "name", l.Name, "action", l.Action)
			}
		}
		vm, err := findVM(ctx, conn, in)
		if err != nil {
			return nil, err
		}
		r, err := s.openRepository(ctx)
		if err != nil {
			return nil, err
		}
		if err := canLock(r, in.LockedUntil, "--immutable-for"); err != nil {
			return nil, err
		}
		w, err := r.NewWriter(ctx, "backup vm "+vm.Name)
		if err != nil {
			return nil, err
		}
		prog := &backup.Progress{}
		t.Progress(Meter{Label: "backup " + vm.Name, Done: prog.BytesDone.Load, Total: vm.ProvisionedBytes, Detail: storedDetail(prog)})
		snap, err := backup.BackupVM(ctx, w, conn, backup.VMRequest{
			Connection: connName, VM: vm.VMRef, Mode: in.Mode, SnapshotMode: in.SnapshotMode,
			Quiesce: in.Quiesce, Tags: in.Tags, RetainUntil: in.LockedUntil,
		}, backup.Options{Progress: prog, ChangeCheckSpans: in.ChangeCheckSpans})
		return s.committed(ctx, t, r, w, snap, err)
	})
}

// backupConnector opens what reaches the VM: a connector over the one QMP
// socket, or the configured connection.
func (s *Service) backupConnector(ctx context.Context, in BackupQEMUInput) (hypervisor.Connector, string, error) {
	if in.Socket != "" {
		conn, err := qemu.New(qemu.Config{Sockets: []string{in.Socket}, StateDir: filepath.Join(s.cfg.StateDir, "qemu"),
			Connections: in.NBDConnections, Log: s.log})
		return conn, "qemu:" + in.Socket, err
	}
	cfg, err := s.engineConfig(ctx)
	if err != nil {
		return nil, "", err
	}
	conns, err := s.openConnectors(ctx, cfg, []string{in.Connection})
	if err != nil {
		return nil, "", err
	}
	return conns.conns[in.Connection], in.Connection, nil
}

// findVM finds the VM to back up in the connector's inventory: the one VM
// of a QMP socket, or the VM of a connection named (or identified) so.
func findVM(ctx context.Context, conn hypervisor.Connector, in BackupQEMUInput) (hypervisor.VM, error) {
	vms, err := conn.Inventory(ctx)
	if err != nil {
		return hypervisor.VM{}, err
	}
	if in.Socket != "" {
		if len(vms) == 0 {
			return hypervisor.VM{}, fmt.Errorf("%w: no VM answers on %s (is the monitor in use by another client?)", hypervisor.ErrNotFound, in.Socket)
		}
		return vms[0], nil
	}
	for _, vm := range vms {
		if vm.Name == in.VM || vm.ID == in.VM {
			return vm, nil
		}
	}
	return hypervisor.VM{}, fmt.Errorf("%w: connection %s has no VM %q (coffer vms lists them)", hypervisor.ErrNotFound, in.Connection, in.VM)
}
