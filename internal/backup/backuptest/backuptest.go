// Package backuptest makes backup points for the tests of the packages that
// read them (restore, files, connectors, engine). It lives above the
// backup pipeline so that internal/repo/repotest needs nothing above the
// repository.
package backuptest

import (
	"context"
	"testing"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
)

// BackupImage backs up the raw image at path into r as one disk (key "0")
// of a point of VM "img", the way `coffer backup disk` does.
func BackupImage(t testing.TB, r *repo.Repository, path string, o backup.Options) *repo.Point {
	t.Helper()
	ctx := context.Background()
	src, err := backup.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = src.Close() }() // read only
	alloc, err := src.Allocated()
	if err != nil {
		t.Fatal(err)
	}
	w, err := r.NewWriter(ctx, "test")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := backup.Run(ctx, w, backup.Request{Source: repo.Source{Kind: "disk", VMName: "img"},
		Disks: []backup.Disk{{Key: "0", Name: "img", Reader: src, Size: src.Size(), Allocated: alloc}}}, o)
	if cerr := w.Close(ctx); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

// BackupVM backs up one VM through connector c in a write session of its
// own, as a job engine task does.
func BackupVM(t testing.TB, r *repo.Repository, c hypervisor.Connector, req backup.VMRequest) (*repo.Point, error) {
	t.Helper()
	ctx := context.Background()
	w, err := r.NewWriter(ctx, "vm")
	if err != nil {
		t.Fatal(err)
	}
	snap, err := backup.BackupVM(ctx, w, c, req, backup.Options{})
	if cerr := w.Close(ctx); err == nil {
		err = cerr // closing flushes the session's index
	}
	return snap, err
}
