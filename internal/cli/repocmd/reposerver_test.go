package repocmd_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/reposerver"
	"github.com/coffer-backup/coffer/internal/reposerver/reposervertest"
)

// repoServerEnv is an env whose repository is served by a real
// repository server (TLS, on loopback), reached with the credential of
// right.
func repoServerEnv(t *testing.T, srv *reposervertest.Server, right reposerver.Right) *clitest.Env {
	e := clitest.NewEnv(t)
	e.Repo = srv.URL
	e.Vars["COFFER_REPO"] = srv.URL
	e.Vars["COFFER_REPO_CREDENTIAL"] = srv.Secrets[right]
	e.Vars["COFFER_REPO_CA_FILE"] = srv.CAFile
	e.Vars["COFFER_CACHE_DIR"] = filepath.Join(e.Dir, "cache")
	return e
}

// TestRepositoryServerRights: through a repository server, an append
// credential initialises the repository and backs up, but its forget is
// refused as access denied (exit 3) and removes nothing; a read
// credential verifies and restores bit-identical but cannot back up; a
// maintain credential forgets and collects garbage; the repository then
// verifies.
func TestRepositoryServerRights(t *testing.T) {
	srv := reposervertest.Start(t, reposerver.DefaultOptions)
	backup, reader, maintainer := repoServerEnv(t, srv, reposerver.Append), repoServerEnv(t, srv, reposerver.Read), repoServerEnv(t, srv, reposerver.Maintain)
	backup.Must("init")
	img := backup.Image("vm.img", 16<<20, 8)
	backup.Must("backup", "disk", img, "--name", "vm")
	backup.Must("backup", "disk", img, "--name", "vm")
	if code, _, stderr := backup.Run("forget", "--keep-last", "1"); code != command.ExitAccess || !strings.Contains(stderr, "may not delete") {
		t.Fatalf("forget with an append credential: exit %d, %s", code, stderr)
	}
	if n := len(clitest.SnapshotsJSON(t, reader)); n != 2 {
		t.Fatalf("%d points after the refused forget, want 2", n)
	}
	if code, _, stderr := reader.Run("backup", "disk", img, "--name", "vm"); code != command.ExitAccess {
		t.Fatalf("backup with a read credential: exit %d, %s", code, stderr)
	}
	reader.Must("verify", "--read-data")
	out := filepath.Join(reader.Dir, "restored.img")
	reader.Must("restore", "latest", "--to", out)
	if !clitest.SameFile(t, out, img) {
		t.Fatal("the restore through the repository server differs from the image")
	}
	maintainer.Must("forget", "--keep-last", "1")
	maintainer.Must("gc")
	reader.Must("verify", "--read-data")
	if n := len(clitest.SnapshotsJSON(t, reader)); n != 1 {
		t.Fatalf("%d points after forget --keep-last 1, want 1", n)
	}
}

// TestKillNineDuringBackupThroughARepositoryServer: the backup kill loop,
// with an append credential through a repository server: each kill
// leaves a repository that verifies, and the last run stores nothing
// twice.
func TestKillNineDuringBackupThroughARepositoryServer(t *testing.T) {
	if testing.Short() {
		t.Skip("crash loop")
	}
	e := repoServerEnv(t, reposervertest.Start(t, reposerver.DefaultOptions), reposerver.Append)
	probe := repoServerEnv(t, reposervertest.Start(t, reposerver.DefaultOptions), reposerver.Append)
	killNineDuringBackup(t, e, probe)
}
