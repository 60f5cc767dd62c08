package upgradecmd_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
)

// root is the checkout this test runs in.
var root = filepath.Join("..", "..", "..")

// previous is the last release as release/previous names it: its tag
// and commit.
func previous(t *testing.T) (tag, commit string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "release", "previous"))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		t.Fatalf("release/previous holds %q, want \"<tag> <commit>\"", b)
	}
	return f[0], f[1]
}

var (
	prevOnce sync.Once
	prevBin  string
	prevErr  error
	prevSkip string
)

// previousBuild builds the last release's coffer from its commit, in a
// git worktree of this checkout, once per test binary and once per
// commit and Go toolchain on this machine (kept in .cache/previous/, so
// only the first run pays the build). It skips the test, saying why, in
// a checkout without git history.
func previousBuild(t *testing.T) string {
	t.Helper()
	tag, commit := previous(t)
	prevOnce.Do(func() {
		abs, err := filepath.Abs(root)
		if err != nil {
			prevErr = err
			return
		}
		if out, err := exec.Command("git", "-C", abs, "cat-file", "-e", commit+"^{commit}").CombinedOutput(); err != nil {
			if _, gerr := exec.Command("git", "-C", abs, "rev-parse", "--git-dir").Output(); gerr != nil {
				prevSkip = "this checkout has no git history: the previous release's build cannot be made here (CI clones have it)"
				return
			}
			prevErr = errors.New("release/previous names commit " + commit + ", which this clone lacks: " + strings.TrimSpace(string(out)))
			return
		}
		prevBin = filepath.Join(abs, ".cache", "previous", "coffer-"+commit+"-"+runtime.Version())
		if _, err := os.Stat(prevBin); err == nil {
			return
		}
		start := time.Now()
		src, err := os.MkdirTemp("", "coffer-previous-")
		if err != nil {
			prevErr = err
			return
		}
		defer func() { _ = os.RemoveAll(src) }()
		tree := filepath.Join(src, "coffer")
		run := func(dir string, args ...string) error {
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Dir = dir
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Run(); err != nil {
				return errors.New(strings.Join(args, " ") + ": " + err.Error() + "\n" + out.String())
			}
			return nil
		}
		if prevErr = run(abs, "git", "worktree", "add", "--detach", tree, commit); prevErr != nil {
			return
		}
		defer func() { _ = run(abs, "git", "worktree", "remove", "--force", tree) }()
		if err := os.MkdirAll(filepath.Dir(prevBin), 0o755); err != nil {
			prevErr = err
			return
		}
		// The release's own build script injects its version.
		if prevErr = run(tree, "bash", "scripts/build.sh", prevBin+".tmp"); prevErr != nil {
			return
		}
		prevErr = os.Rename(prevBin+".tmp", prevBin)
		t.Logf("built %s (%s) in %v", tag, commit, time.Since(start).Round(time.Millisecond))
	})
	if prevSkip != "" {
		t.Skip(prevSkip)
	}
	if prevErr != nil {
		t.Fatalf("building the previous release %s: %v", tag, prevErr)
	}
	return prevBin
}

// build is one coffer binary on the test's repository: its own catalog,
// cache and state (another version's catalog may be of another schema,
// its cache of another format).
type build struct {
	t    *testing.T
	bin  string
	vars []string
}

func newBuild(t *testing.T, bin, repo, dir string) *build {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "none.yaml")
	if err := os.WriteFile(cfg, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return &build{t: t, bin: bin, vars: []string{"COFFER_REPO=" + repo, "COFFER_PASSWORD=correct horse", "COFFER_CONFIG=" + cfg,
		"COFFER_CATALOG=" + filepath.Join(dir, "catalog.db"), "COFFER_CACHE_DIR=" + filepath.Join(dir, "cache"),
		"COFFER_STATE_DIR=" + filepath.Join(dir, "state")}}
}

// run runs the build with args and returns its exit code and output.
func (b *build) run(args ...string) (int, string) {
	b.t.Helper()
	cmd := exec.Command(b.bin, args...)
	cmd.Env = append(os.Environ(), b.vars...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		b.t.Fatal(err)
	}
	return 0, string(out)
}

func (b *build) must(args ...string) string {
	b.t.Helper()
	code, out := b.run(args...)
	if code != 0 {
		b.t.Fatalf("%s %v: exit %d\n%s", filepath.Base(b.bin), args, code, out)
	}
	return out
}

// TestPreviousBuildAndThisOne: the last release writes a repository
// (two VMs, a full and an incremental point of one); this build verifies
// it with --read-data, forgets a point and collects the garbage; then
// the release reads the result: it verifies it and restores the newest
// point bit-identical, or, had this build changed the format, refuses
// with "newer coffer" and exit code 8. Anything else (a crash, another
// error) fails.
func TestPreviousBuildAndThisOne(t *testing.T) {
	prevPath := previousBuild(t)
	tag, _ := previous(t)
	e := clitest.NewEnv(t)
	prev := newBuild(t, prevPath, e.Repo, filepath.Join(e.Dir, tag))
	t.Logf("previous build: %s", strings.TrimSpace(prev.must("version")))

	prev.must("init")
	img := e.Image("a.raw", 4<<20, 2)
	prev.must("backup", "disk", img, "--name", "a")
	if err := os.WriteFile(filepath.Join(e.Dir, "b.raw"), bytes.Repeat([]byte("coffer b "), 200_000), 0o600); err != nil {
		t.Fatal(err)
	}
	prev.must("backup", "disk", filepath.Join(e.Dir, "b.raw"), "--name", "b")
	f, err := os.OpenFile(img, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0x5a}, 300_000), 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	prev.must("backup", "disk", img, "--name", "a")

	// This build, with its own catalog.
	e.Must("verify", "--read-data")
	before := len(clitest.SnapshotsJSON(t, e))
	e.Must("forget", "--keep-last", "1")
	e.Must("gc")
	e.Must("verify", "--read-data")
	after := clitest.SnapshotsJSON(t, e)
	if before != 3 || len(after) != 2 {
		t.Fatalf("%d points before forget --keep-last 1, %d after; want 3 and 2 (one per VM)", before, len(after))
	}

	code, out := prev.run("verify", "--read-data")
	switch code {
	case 0:
		restored := filepath.Join(e.Dir, "restored.raw")
		prev.must("restore", "latest", "--to", restored)
		if !clitest.SameFile(t, img, restored) {
			t.Errorf("%s restores a's newest point differently from its image after this build's forget and gc", tag)
		}
		t.Logf("%s verified and restored the repository after this build's forget and gc", tag)
	case 8:
		if !strings.Contains(out, "newer") {
			t.Errorf("%s refused the repository with exit code 8 but without saying a newer coffer wrote it:\n%s", tag, out)
		}
		t.Logf("%s refuses the repository this build changed: %s", tag, strings.TrimSpace(out))
	default:
		t.Fatalf("%s verify --read-data after this build's forget and gc: exit %d, want 0 or 8 (written by a newer coffer)\n%s", tag, code, out)
	}
}
