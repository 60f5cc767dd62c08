package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/service/servicetest"

	"github.com/coffer-backup/coffer/internal/store"
	"github.com/coffer-backup/coffer/internal/store/local"
	"github.com/coffer-backup/coffer/internal/store/storetest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestMain lets tests re-run this binary as coffer itself, so that a
// backup can be killed with SIGKILL like a real process.
func TestMain(m *testing.M) {
	// The simulated fleet (kind: fake) exists in this test binary only,
	// and in the coffer processes it re-runs as.
	servicetest.RegisterFake()
	if os.Getenv("COFFER_TEST_AS_CLI") == "1" {
		if at := os.Getenv("COFFER_TEST_CRASH_AT"); at != "" {
			n, _ := strconv.Atoi(strings.TrimSuffix(at, "+"))
			storeHook = func(st store.Store) store.Store { return storetest.CrashAt(st, n, strings.HasSuffix(at, "+")) }
		}
		if gate := os.Getenv("COFFER_TEST_GATE_READS"); gate != "" {
			storeHook = func(st store.Store) store.Store { return gatedReads{Store: st, gate: gate} }
		}
		// As cmd/coffer does: SIGTERM and Ctrl-C cancel the command.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := Execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// env is a test repository and the environment to reach it.
type env struct {
	t    *testing.T
	dir  string
	repo string
	vars map[string]string
}

func newEnv(t *testing.T) *env {
	dir := t.TempDir()
	e := &env{t: t, dir: dir, repo: filepath.Join(dir, "repo"), vars: map[string]string{}}
	e.vars["COFFER_REPO"] = e.repo
	e.vars["COFFER_PASSWORD"] = "correct horse"
	e.vars["COFFER_CONFIG"] = filepath.Join(dir, "none.yaml")
	e.vars["COFFER_CATALOG"] = filepath.Join(dir, "catalog.db") // backups record points there
	if err := os.WriteFile(e.vars["COFFER_CONFIG"], nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return e
}

// run executes coffer in-process with the env's variables.
func (e *env) run(args ...string) (int, string, string) {
	e.t.Helper()
	for k, v := range e.vars {
		e.t.Setenv(k, v)
	}
	var out, errOut bytes.Buffer
	code := Execute(context.Background(), args, strings.NewReader(""), &out, &errOut)
	// A command leaves no file of the repository or the catalog open: the
	// CLI and the server share the service, and a server would leak them
	// call by call.
	for _, v := range []string{"COFFER_REPO", "COFFER_CATALOG"} {
		if loc := e.vars[v]; filepath.IsAbs(loc) {
			if held := testutil.OwnFilesUnder(loc); len(held) > 0 {
				e.t.Errorf("coffer %v left files open: %s", args, strings.Join(held, "; "))
			}
		}
	}
	return code, out.String(), errOut.String()
}

func (e *env) must(args ...string) string {
	e.t.Helper()
	code, out, errOut := e.run(args...)
	if code != 0 {
		e.t.Fatalf("coffer %v: exit %d\n%s%s", args, code, out, errOut)
	}
	return out
}

func (e *env) expect(want int, args ...string) string {
	e.t.Helper()
	code, out, errOut := e.run(args...)
	if code != want {
		e.t.Fatalf("coffer %v: exit %d, want %d\n%s%s", args, code, want, out, errOut)
	}
	return out + errOut
}

// image writes a sparse image with size bytes, dataMiB of it random.
func (e *env) image(name string, size int64, dataMiB int) string {
	p := filepath.Join(e.dir, name)
	f, err := os.Create(p)
	if err != nil {
		e.t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		e.t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for i := range dataMiB {
		_, _ = rand.Read(buf)
		if _, err := f.WriteAt(buf, int64(i)*2<<20); err != nil {
			e.t.Fatal(err)
		}
	}
	return p
}

func snapshotsJSON(t *testing.T, e *env) []api.BackupPoint {
	var v []api.BackupPoint
	if err := json.Unmarshal([]byte(e.must("snapshots", "--json")), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestExitCodesAndMessages(t *testing.T) {
	e := newEnv(t)
	if out := e.expect(ExitNoRepo, "snapshots"); !strings.Contains(out, "coffer init") {
		t.Fatalf("no advice to run init: %s", out)
	}
	e.must("init")
	e.expect(ExitUsage, "init")
	e.expect(ExitUsage, "snapshots", "--no-such-flag")
	e.expect(ExitUsage, "forget") // no keep rule
	img := e.image("a.img", 16<<20, 3)
	e.must("backup", "disk", img)
	e.expect(ExitNoRepo, "restore", "ffffffff", "--to", filepath.Join(e.dir, "x"))
	e.vars["COFFER_PASSWORD"] = "wrong"
	if out := e.expect(ExitAccess, "snapshots"); !strings.Contains(out, "wrong password") {
		t.Fatalf("unclear wrong-password message: %s", out)
	}
	e.vars["COFFER_PASSWORD"] = "correct horse"
	// A format version that only the plaintext config says is damage (the
	// authenticated copy in the key says 1): worked around, with the
	// repair named. (A repository a newer coffer wrote, its key saying so
	// too, is refused with a request to upgrade: repo's
	// TestConfigVersionDamageAgainstNewerRepository.)
	cfgPath := filepath.Join(e.repo, "config")
	raw, _ := os.ReadFile(cfgPath)
	_ = os.WriteFile(cfgPath, bytes.Replace(raw, []byte(`"format_version": 1`), []byte(`"format_version": 99`), 1), 0o600)
	if _, _, errOut := e.run("snapshots"); !strings.Contains(errOut, "coffer repair config") {
		t.Fatalf("a config whose version alone changed: %s", errOut)
	}
	_ = os.WriteFile(cfgPath, raw, 0o600)
	// --json errors are machine-readable.
	e.vars["COFFER_PASSWORD"] = "wrong"
	_, out, _ := e.run("snapshots", "--json")
	var je map[string]any
	if err := json.Unmarshal([]byte(out), &je); err != nil || je["exit_code"].(float64) != ExitAccess {
		t.Fatalf("json error = %q (%v)", out, err)
	}
}

func TestKeys(t *testing.T) {
	e := newEnv(t)
	e.must("init")
	pw2 := filepath.Join(e.dir, "pw2")
	_ = os.WriteFile(pw2, []byte("second password\n"), 0o600)
	e.must("key", "add", "--new-password-file", pw2, "--label", "offsite")
	var keys []api.Key
	_ = json.Unmarshal([]byte(e.must("key", "list", "--json")), &keys)
	if len(keys) != 2 || !keys[0].Current || keys[1].Current {
		t.Fatalf("keys %+v: want two, the first in use", keys)
	}
	// The key in use (the first password's) is refused (issue 37): it
	// would lock its user out at the next open. It still opens.
	if out := e.expect(ExitUsage, "key", "remove", keys[0].ID[:8]); !strings.Contains(out, "currently used to access the repository") ||
		!strings.Contains(out, "coffer key add") {
		t.Fatalf("the key in use: %s", out)
	}
	e.must("snapshots")
	e.vars["COFFER_PASSWORD"] = "second password"
	e.must("snapshots")
	// Remove the first key with the second password; the first no longer opens.
	e.must("key", "remove", keys[0].ID[:8])
	e.vars["COFFER_PASSWORD"] = "correct horse"
	e.expect(ExitAccess, "snapshots")
	e.vars["COFFER_PASSWORD"] = "second password"
	if out := e.expect(ExitUsage, "key", "remove", keys[1].ID[:8]); !strings.Contains(out, "last key") {
		t.Fatalf("last key removable: %s", out)
	}
}

// TestCorruptionIsLocalised flips a byte in one pack and truncates another:
// verify names exactly the affected backup points, and every other point
// still restores.
func TestCorruptionIsLocalised(t *testing.T) {
	e := newEnv(t)
	e.must("init", "--pack-size", "1MiB")
	a := e.image("a.img", 8<<20, 2)
	b := e.image("b.img", 8<<20, 2)
	e.must("backup", "disk", a, "--name", "a")
	e.must("backup", "disk", b, "--name", "b")
	snaps := snapshotsJSON(t, e)
	// Find the packs of "a" through the index: corrupt the first pack written.
	var packs []string
	_ = filepath.WalkDir(filepath.Join(e.repo, "data"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			packs = append(packs, p)
		}
		return nil
	})
	if len(packs) < 4 {
		t.Fatalf("only %d packs", len(packs))
	}
	victim := ""
	for _, p := range packs {
		fi, _ := os.Stat(p)
		if fi.ModTime().Before(modTime(t, e, e.manifest(snaps[1].ID).Disks[0].Map)) || victim == "" {
			victim = p
		}
	}
	raw, _ := os.ReadFile(victim)
	raw[100] ^= 0xff
	_ = os.WriteFile(victim, raw, 0o600)
	out := e.expect(ExitIntegrity, "verify", "--read-data")
	if !strings.Contains(out, "DATA LOST corrupt-chunk") || !strings.Contains(out, "    point ") {
		t.Fatalf("verify output does not localise the damage:\n%s", out)
	}
	var rep struct {
		Problems []struct {
			Kind    string
			Affects []struct{ VM string }
		}
	}
	_, js, _ := e.run("verify", "--read-data", "--json")
	_ = json.Unmarshal([]byte(js), &rep)
	affected := map[string]bool{}
	for _, p := range rep.Problems {
		for _, af := range p.Affects {
			affected[af.VM] = true
		}
	}
	if len(affected) != 1 {
		t.Fatalf("damage to one pack reported against %v", affected)
	}
	// The other source restores and matches its image.
	for _, s := range snaps {
		target := filepath.Join(e.dir, "restored-"+s.VM)
		src := map[string]string{"a": a, "b": b}[s.VM]
		code, _, _ := e.run("restore", s.ID, "--to", target)
		if affected[s.VM] {
			if code != ExitIntegrity {
				t.Fatalf("restore of the damaged point: exit %d, want %d", code, ExitIntegrity)
			}
			continue
		}
		if code != 0 || !sameFile(t, target, src) {
			t.Fatalf("undamaged point %s did not restore (exit %d)", s.VM, code)
		}
	}
	// A truncated pack is found without reading data.
	_ = os.Truncate(victim, 50)
	if out := e.expect(ExitIntegrity, "verify"); !strings.Contains(out, "truncated-pack") {
		t.Fatalf("truncation not found: %s", out)
	}
}

func TestDamagedIndexSegmentIsRepaired(t *testing.T) {
	e := newEnv(t)
	e.must("init")
	img := e.image("a.img", 8<<20, 3)
	e.must("backup", "disk", img)
	segs, _ := filepath.Glob(filepath.Join(e.repo, "index", "*"))
	if len(segs) != 1 {
		t.Fatalf("%d segments", len(segs))
	}
	raw, _ := os.ReadFile(segs[0])
	_ = os.WriteFile(segs[0], raw[:len(raw)-3], 0o600)
	// The repository still opens; verify names the damage, and that the
	// packs still hold everything (no data lost).
	out := e.expect(ExitIntegrity, "verify")
	if !strings.Contains(out, "coffer repair index") || !strings.Contains(out, "no backup lost data") || strings.Contains(out, "DATA LOST") {
		t.Fatalf("verify output:\n%s", out)
	}
	e.must("repair", "index")
	e.must("verify", "--read-data")
	target := filepath.Join(e.dir, "r.img")
	e.must("restore", "latest", "--to", target)
	if !sameFile(t, target, img) {
		t.Fatal("restore after repair differs")
	}
}

func modTime(t *testing.T, e *env, object string) time.Time {
	fi, err := os.Stat(filepath.Join(e.repo, object))
	if err != nil {
		t.Fatal(err)
	}
	return fi.ModTime()
}

func TestRetentionAndGC(t *testing.T) {
	e := newEnv(t)
	e.must("init", "--pack-size", "1MiB")
	img := e.image("a.img", 16<<20, 4)
	for range 4 {
		f, _ := os.OpenFile(img, os.O_RDWR, 0)
		buf := make([]byte, 1<<20)
		_, _ = rand.Read(buf)
		_, _ = f.WriteAt(buf, 0) // the same MiB changes before every backup
		f.Close()
		e.must("backup", "disk", img, "--name", "a")
	}
	before := dirSize(t, filepath.Join(e.repo, "data"))
	snaps := snapshotsJSON(t, e)
	e.must("protect", snaps[0].ID)
	e.must("forget", "--keep-last", "1")
	if n := len(snapshotsJSON(t, e)); n != 2 {
		t.Fatalf("%d snapshots after forget --keep-last 1 with one protected, want 2", n)
	}
	var rep struct {
		PacksDeleted int `json:"packs_deleted"`
	}
	_ = json.Unmarshal([]byte(e.must("gc", "--json")), &rep)
	after := dirSize(t, filepath.Join(e.repo, "data"))
	if rep.PacksDeleted == 0 || after >= before {
		t.Fatalf("gc deleted %d packs, data %d -> %d bytes", rep.PacksDeleted, before, after)
	}
	e.must("verify", "--read-data")
	for _, s := range snapshotsJSON(t, e) {
		target := filepath.Join(e.dir, "r-"+s.ShortID)
		e.must("restore", s.ID, "--to", target)
	}
	last := snapshotsJSON(t, e)[1]
	if !sameFile(t, filepath.Join(e.dir, "r-"+last.ShortID), img) {
		t.Fatal("latest point restores wrong after gc")
	}
}

func dirSize(t *testing.T, dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			fi, _ := d.Info()
			n += fi.Size()
		}
		return nil
	})
	return n
}

func sameFile(t *testing.T, a, b string) bool {
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(x, y)
}

// manifest reads a backup point's manifest from the env's local
// repository, for tests that reach into its objects (the documents do not
// name the repository's internal objects).
func (e *env) manifest(pointID string) *repo.Point {
	e.t.Helper()
	ctx := context.Background()
	st, err := local.Open(e.repo)
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := repo.Open(ctx, st, []byte(e.vars["COFFER_PASSWORD"]), repo.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	s, err := r.FindPoint(ctx, pointID)
	if err != nil {
		e.t.Fatal(err)
	}
	return s
}
