// Package repotest creates throwaway repositories for the tests of the
// packages built on the repository (backup, restore, files, connectors,
// engine): one place for what every such test needs first.
package repotest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/crypto"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/store/local"
)

// FastKDF derives keys in milliseconds; tests open many repositories.
var FastKDF = &crypto.KDF{Algorithm: "argon2id", Time: 1, MemoryKiB: 8 << 10, Threads: 1, Salt: []byte("0123456789abcdef")}

// Password opens the repositories New creates.
const Password = "pw"

// New initialises a repository in a fresh directory of the test with o
// (Password and KDF are filled in) and opens it.
func New(t testing.TB, o repo.InitOptions) *repo.Repository {
	t.Helper()
	ctx := context.Background()
	st, err := local.Create(filepath.Join(t.TempDir(), "repo"))
	if err != nil {
		t.Fatal(err)
	}
	o.Password, o.KDF = []byte(Password), FastKDF
	if _, err := repo.Init(ctx, st, o); err != nil {
		t.Fatal(err)
	}
	r, err := repo.Open(ctx, st, []byte(Password), repo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// BackupImage backs up the raw image at path into r as one disk (key "0")
// of a point of VM "img", the way `coffer backup disk` does.
func BackupImage(t testing.TB, r *repo.Repository, path string, o backup.Options) *repo.Snapshot {
	t.Helper()
	ctx := context.Background()
	src, err := backup.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
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
func BackupVM(t testing.TB, r *repo.Repository, c hypervisor.Connector, req backup.VMRequest) (*repo.Snapshot, error) {
	t.Helper()
	ctx := context.Background()
	w, err := r.NewWriter(ctx, "vm")
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close(ctx)
	return backup.BackupVM(ctx, w, c, req, backup.Options{})
}
