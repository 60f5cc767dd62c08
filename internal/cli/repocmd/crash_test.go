package repocmd_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/testutil"
)

type statsView struct {
	Unique    int64 `json:"unique_bytes"`
	PackBytes int64 `json:"pack_bytes"`
}

func repoStats(t *testing.T, e *clitest.Env) statsView {
	var s statsView
	if err := json.Unmarshal([]byte(e.Must("stats", "--json")), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestKillNineDuringBackup kills backups at random instants, checks after
// each kill that the repository verifies, and that the final complete run
// stores no chunk twice: what the killed runs packed is reused.
func TestKillNineDuringBackup(t *testing.T) {
	if testing.Short() {
		t.Skip("crash loop")
	}
	killNineDuringBackup(t, clitest.NewEnv(t), clitest.NewEnv(t))
}

// killNineDuringBackup runs the kill loop on e's repository; probe is a
// second, empty repository of the same kind to time a full backup on.
func killNineDuringBackup(t *testing.T, e, probe *clitest.Env) {
	e.Must("init", "--pack-size", "1MiB")
	img := e.Image("vm.img", 96<<20, 40) // 40 MiB of incompressible data, in 40 packs
	// The kill points span a whole backup process as the loop runs it
	// (start, key derivation, reading, packing, commit), timed on probe.
	probe.Must("init", "--pack-size", "1MiB")
	start := time.Now()
	if out, err := probe.Child("backup", "disk", img).CombinedOutput(); err != nil {
		t.Fatalf("probe backup: %v %s", err, out)
	}
	full := time.Since(start)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	// Kill points fall within the last complete run: the probe's at first;
	// once a run completes, later runs only deduplicate and finish sooner,
	// so the window shrinks to the run that completed. Rounds go on until
	// `want` runs were killed, as the gc loop does: a fixed number of
	// rounds all finishing before their kill point proves nothing.
	window, want := full, soakRounds(8) // at least 8 kills per backend in CI
	kills := 0
	for round := 0; kills < want; round++ {
		if round > 4*want {
			t.Fatalf("only %d of %d runs were killed (a full backup takes %v): the kill points are too late", kills, round, full)
		}
		d := time.Duration(rng.Int64N(int64(window))) + time.Millisecond
		start := time.Now()
		if e.KillAfter(d, "backup", "disk", img, "--name", "vm") {
			window = time.Since(start)
		} else {
			kills++
		}
		e.Must("verify", "--read-data")
		t.Logf("round %d: kill after %v", round, d)
	}
	e.Must("backup", "disk", img, "--name", "vm")
	e.Must("verify", "--read-data")
	s := repoStats(t, e)
	// Each chunk is stored once: packs hold little more than the unique data.
	if s.PackBytes > s.Unique+s.Unique/20+64<<10 {
		t.Fatalf("packs hold %d bytes for %d unique bytes: interrupted runs' chunks were stored again", s.PackBytes, s.Unique)
	}
	snaps := clitest.SnapshotsJSON(t, e)
	out := filepath.Join(e.Dir, "restored.img")
	e.Must("restore", snaps[len(snaps)-1].ID, "--to", out)
	if !clitest.SameFile(t, out, img) {
		t.Fatal("restored image differs")
	}
	t.Logf("%d runs killed; packs %d bytes for %d unique", kills, s.PackBytes, s.Unique)
}

// TestKillNineDuringGC kills garbage collection at random instants.
func TestKillNineDuringGC(t *testing.T) {
	if testing.Short() {
		t.Skip("crash loop")
	}
	killNineDuringGC(t, clitest.NewEnv(t), soakRounds(8))
}

// killNineDuringGC kills gc with SIGKILL until it has been killed kills
// times. Each round first gives it work (a new generation backed up, the
// oldest point forgotten) and kills it at a random instant within the time
// the last complete run took; after every kill the repository must verify
// and hold exactly the points it should. At the end every point restores.
func killNineDuringGC(t *testing.T, e *clitest.Env, kills int) {
	e.Must("init", "--pack-size", "1MiB")
	img, versions := generations(e, 3)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	window := 300 * time.Millisecond
	killed := 0
	for round := 0; killed < kills; round++ {
		if round > 4*kills {
			t.Fatalf("only %d of %d runs were killed: the kill points are too late", killed, round)
		}
		rewrite(e, img, round)
		e.Must("backup", "disk", img, "--name", "vm")
		versions = append(versions[1:], copyFile(e, img, fmt.Sprintf("round-%d.img", round)))
		e.Must("forget", "--keep-last", "3")
		d := time.Duration(rng.Int64N(int64(window))) + time.Millisecond
		start := time.Now()
		if e.KillAfter(d, "gc") {
			window = time.Since(start)
		} else {
			killed++
		}
		e.Must("verify", "--read-data")
		if got := len(clitest.SnapshotsJSON(t, e)); got != 3 {
			t.Fatalf("round %d: %d points after a killed gc, want 3", round, got)
		}
	}
	e.Must("gc")
	e.Must("verify", "--read-data")
	restoresAll(e, versions)
	t.Logf("gc killed %d times", killed)
}

// TestFullDisk fills the repository's filesystem mid-backup: the backup
// fails with the no-space exit code, nothing is corrupted, and once space
// is added the re-run completes without storing chunks twice.
func TestFullDisk(t *testing.T) {
	testutil.RequireRoot(t)
	e := clitest.NewEnv(t)
	mnt := filepath.Join(e.Dir, "small")
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=12m", "tmpfs", mnt).CombinedOutput(); err != nil {
		if testutil.Strict() {
			t.Fatalf("mount tmpfs: %v %s", err, out)
		}
		t.Skipf("cannot mount tmpfs here: %s", out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	e.Repo = filepath.Join(mnt, "repo")
	e.Vars["COFFER_REPO"] = e.Repo
	e.Must("init", "--pack-size", "1MiB")
	img := e.Image("vm.img", 48<<20, 20)
	out := e.Expect(command.ExitNoSpace, "backup", "disk", img)
	if !strings.Contains(out, "re-run") {
		t.Fatalf("no advice: %s", out)
	}
	if out, err := exec.Command("mount", "-o", "remount,size=64m", mnt).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v %s", err, out)
	}
	e.Must("verify", "--read-data")
	e.Must("backup", "disk", img)
	e.Must("verify", "--read-data")
	s := repoStats(t, e)
	if s.PackBytes > s.Unique+s.Unique/20+64<<10 {
		t.Fatalf("packs hold %d bytes for %d unique bytes after the re-run", s.PackBytes, s.Unique)
	}

	// A restore onto a filesystem too small for the disk's data fails at
	// once (its space is reserved before writing) with the same exit code,
	// and leaves no partial file to fill the filesystem.
	tiny := filepath.Join(e.Dir, "tiny")
	if err := os.MkdirAll(tiny, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", tiny).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", tiny).Run() })
	out = e.Expect(command.ExitNoSpace, "restore", "latest", "--to", filepath.Join(tiny, "vm.img"))
	if !strings.Contains(out, "space on the restore target") || !strings.Contains(out, "restore somewhere else") {
		t.Fatalf("restore onto a full filesystem: %s", out)
	}
	if left, _ := os.ReadDir(tiny); len(left) != 0 {
		t.Fatalf("a failed restore left %d file(s) behind: %s", len(left), left[0].Name())
	}
}
