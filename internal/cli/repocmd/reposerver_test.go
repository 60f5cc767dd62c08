package repocmd_test

import (
	"io/fs"
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

// TestImmutablePointsThroughARepositoryServer: a point backed up with
// --immutable-for through a repository server has its objects (its
// manifest, disk map and packs, and the repository's config and keys)
// immutable on the storage host's file system, and a maintain credential's forget
// and gc remove none of them before the lock lapses; the repository
// verifies.
func TestImmutablePointsThroughARepositoryServer(t *testing.T) {
	srv := reposervertest.StartImmutable(t, reposerver.DefaultOptions)
	backup, maintainer := repoServerEnv(t, srv, reposerver.Append), repoServerEnv(t, srv, reposerver.Maintain)
	backup.Must("init")
	img := backup.Image("vm.img", 16<<20, 8)
	backup.Must("backup", "disk", img, "--name", "vm", "--immutable-for", "30d")
	locked := immutableFiles(t, srv.Dir)
	kinds := map[string]bool{}
	for _, p := range locked {
		rel, _ := filepath.Rel(srv.Dir, p)
		kinds[strings.SplitN(rel, "/", 2)[0]] = true
	}
	for _, k := range []string{"config", "keys", "data", "maps", "snapshots"} {
		if !kinds[k] {
			t.Errorf("no file of %s/ is immutable on the storage host after a backup with --immutable-for (immutable: %v)", k, locked)
		}
	}
	backup.Must("backup", "disk", backup.Image("other.img", 16<<20, 8), "--name", "vm")
	code, _, stderr := maintainer.Run("forget", "--keep-last", "1")
	t.Logf("forget of the locked point: exit %d: %s", code, strings.TrimSpace(stderr))
	maintainer.Must("gc")
	maintainer.Must("verify", "--read-data")
	if n := len(clitest.SnapshotsJSON(t, maintainer)); n != 2 {
		t.Fatalf("%d points after forget and gc, want both (one is locked)", n)
	}
	if after := immutableFiles(t, srv.Dir); len(after) < len(locked) {
		t.Fatalf("%d immutable files before forget and gc, %d after", len(locked), len(after))
	}
	t.Logf("%d files of the point immutable on the storage host", len(locked))
}

// immutableFiles lists the files under dir with FS_IMMUTABLE_FL.
func immutableFiles(t *testing.T, dir string) []string {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if on, err := reposerver.IsImmutable(p); err == nil && on {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
