package replicacmd_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/replica"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestKilledCofferProcessKeepsTheStandby kills the `coffer replicas run`
// process (SIGKILL) eight times, each after a new backup, every other
// time while it writes an overlay and the others at spread instants of a
// run: the standby's record names only complete points, every
// overlay it names passes `qemu-img check`, the newest equals its backup
// point (qemu-img compare against a restore of it), and the next run
// brings the standby to the new point.
func TestKilledCofferProcessKeepsTheStandby(t *testing.T) {
	testutil.RequireBinary(t, "qemu-img")
	testutil.RequireBinary(t, "qemu-nbd")
	e := clitest.NewEnv(t)
	e.Must("init")
	standbys := filepath.Join(e.Dir, "dr")
	e.Config(`connections:
  - {name: dr, kind: qemu, options: {sockets: ["` + e.Dir + `/none/*.qmp"]}}
replications:
  - {name: web-dr, vms: [web], connection: dr, directory: ` + standbys + `, keep: 2}
`)
	img := e.Image("web.img", 64<<20, 48)
	e.Must("backup", "disk", img, "--name", "web")
	e.Must("replicas", "run", "web-dr")
	const reps = 8
	var took time.Duration // the last whole run's
	killed, midWrite := 0, 0
	for rep := range reps {
		f, err := os.OpenFile(img, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte(strings.Repeat(fmt.Sprintf("rep%d", rep), 2<<20)), int64(rep%4)<<23); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
		point := clitest.Decode[api.BackupPoint](t, e.Must("backup", "disk", img, "--name", "web", "--json"))
		// Every other run is killed while it writes an overlay (as soon
		// as one its record does not name appears); the others at times
		// spread over a run like this one (the first: over a guess), so
		// that kills also land in its start, its merges and its record.
		if took == 0 {
			took = 3 * time.Second
		}
		var finished bool
		if rep%2 == 1 {
			finished = e.KillWhen(func() bool { return writingOverlay(filepath.Join(standbys, "web")) }, "replicas", "run", "web-dr")
		} else {
			finished = e.KillAfter(took*time.Duration(rep+1)/(reps+1), "replicas", "run", "web-dr")
		}
		if !finished {
			killed++
		}
		st := standbyWhole(t, e, filepath.Join(standbys, "web"))
		if unrecorded(filepath.Join(standbys, "web"), st) {
			midWrite++
		}
		start := time.Now() // a process as the killed one, so the same start-up
		if !e.KillAfter(time.Hour, "replicas", "run", "web-dr") {
			t.Fatal("a run took an hour")
		}
		took = time.Since(start)
		st = standbyWhole(t, e, filepath.Join(standbys, "web"))
		if got := st.Points[len(st.Points)-1].BackupPoint; got != point.ID {
			t.Fatalf("rep %d: after the next run the standby is at %s, not %s", rep, got, point.ID)
		}
	}
	if midWrite == 0 {
		t.Fatalf("no kill (%d of %d before the run ended) came while an overlay was being written (a run takes %s)", killed, reps, took)
	}
	t.Logf("%d of %d runs killed, %d of them while writing an overlay", killed, reps, midWrite)
}

// writingOverlay says whether a run is writing an overlay into the
// standby's directory now (false while its record cannot be read, as
// mid-rename).
func writingOverlay(dir string) bool {
	st, err := replica.LoadState(dir)
	return err == nil && unrecorded(dir, st)
}

// unrecorded says whether the standby's directory holds an overlay its
// record does not name: what a run writes before it records it, and what
// a run killed while writing leaves (the next run deletes it).
func unrecorded(dir string, st *replica.State) bool {
	named := map[string]bool{}
	for _, p := range st.Points {
		for _, d := range p.Disks {
			named[filepath.Base(d.File)] = true
		}
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.qcow2")) // (its only error: a malformed pattern)
	for _, f := range files {
		if !named[filepath.Base(f)] {
			return true
		}
	}
	return false
}

// standbyWhole checks a standby as a failover would find it: every
// overlay its record names is a sound qcow2, and its newest point equals
// the backup point it names.
func standbyWhole(t *testing.T, e *clitest.Env, dir string) *replica.State {
	t.Helper()
	st, err := replica.LoadState(dir)
	if err != nil || len(st.Points) == 0 {
		t.Fatalf("the standby's record: %+v, %v", st, err)
	}
	for _, p := range st.Points {
		for _, d := range p.Disks {
			if out, err := exec.Command("qemu-img", "check", "-q", "-f", "qcow2", d.File).CombinedOutput(); err != nil {
				t.Fatalf("qemu-img check %s (point %d): %v %s", d.File, p.Seq, err, out)
			}
		}
	}
	newest := st.Points[len(st.Points)-1]
	restored := filepath.Join(e.Dir, "restored.raw")
	_ = os.Remove(restored)
	e.Must("restore", newest.BackupPoint, "--to", restored)
	if out, err := exec.Command("qemu-img", "compare", "-f", "qcow2", "-F", "raw", newest.Disks[0].File, restored).CombinedOutput(); err != nil {
		t.Fatalf("the standby's newest point %d differs from backup point %s: %v %s", newest.Seq, newest.BackupPoint, err, out)
	}
	return st
}
