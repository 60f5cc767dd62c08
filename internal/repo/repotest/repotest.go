// Package repotest creates throwaway repositories for the tests of the
// packages built on the repository (backup, restore, files, connectors,
// engine): one place for what every such test needs first. It needs
// nothing above the repository; backup points for tests are made by
// internal/backup/backuptest.
package repotest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/coffer-backup/coffer/internal/crypto"
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
