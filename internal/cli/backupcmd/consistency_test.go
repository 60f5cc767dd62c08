package backupcmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil/vclab"

	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/store/local"
)

// snapshotLine is the line of `coffer snapshots` for one point.
func snapshotLine(t *testing.T, e *clitest.Env, short string) string {
	t.Helper()
	for _, l := range strings.Split(e.Must("snapshots"), "\n") {
		if strings.HasPrefix(l, short+" ") {
			return l
		}
	}
	t.Fatalf("coffer snapshots lists no %s", short)
	return ""
}

// catalogPoint is the catalog's --json record of one point.
func catalogPoint(t *testing.T, e *clitest.Env, pointID string) api.BackupPoint {
	t.Helper()
	var points []api.BackupPoint
	if err := json.Unmarshal([]byte(e.Must("catalog", "points", "--json")), &points); err != nil {
		t.Fatal(err)
	}
	for _, p := range points {
		if p.ID == pointID {
			return p
		}
	}
	t.Fatalf("catalog has no point %s: %+v", pointID, points)
	return api.BackupPoint{}
}

// wantModes checks a point's requested and achieved snapshot modes as the
// repository (snapshots --json, and the listing's CONSISTENCY column) and
// the catalog (catalog points --json) report them.
func wantModes(t *testing.T, e *clitest.Env, pointID, requested, achieved, column string) {
	t.Helper()
	var found bool
	for _, v := range clitest.SnapshotsJSON(t, e) {
		if v.ID == pointID {
			found = true
			if v.SnapshotMode != requested || v.SnapshotModeAchieved != achieved {
				t.Fatalf("snapshots --json: %s requested %q achieved %q, want %q/%q", v.ShortID, v.SnapshotMode, v.SnapshotModeAchieved, requested, achieved)
			}
		}
	}
	if !found {
		t.Fatalf("snapshots --json lists no %s", pointID)
	}
	if line := snapshotLine(t, e, pointID[:8]); !strings.Contains(line, "  "+column+"  ") {
		t.Fatalf("coffer snapshots shows %q, want CONSISTENCY %q", line, column)
	}
	if p := catalogPoint(t, e, pointID); p.SnapshotMode != requested || p.SnapshotModeAchieved != achieved {
		t.Fatalf("catalog point %s: requested %q achieved %q, want %q/%q", pointID[:8], p.SnapshotMode, p.SnapshotModeAchieved, requested, achieved)
	}
}

// TestQEMUQuiesceFallbackRecordsAchievedMode backs up two real QEMU
// guests with --snapshot-mode quiesced --quiesce fallback: the one whose
// guest agent runs is recorded quiesced/quiesced, the one without an
// agent quiesced/crash-consistent, in the manifest, the listing, --json
// and the catalog.
func TestQEMUQuiesceFallbackRecordsAchievedMode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	e := clitest.NewEnv(t)
	vms := clitest.BootGuests(t, ctx, e.Dir, []bool{true, false})
	e.Vars["COFFER_STATE_DIR"] = filepath.Join(e.Dir, "state")
	e.Must("init")
	for i, want := range []struct{ achieved, column, warning string }{
		{"quiesced", "quiesced", ""},
		{"crash-consistent", "crash-consistent (quiesced requested)", "guest agent did not quiesce"},
	} {
		var v api.BackupPoint
		out := e.Must("backup", "vm", vms[i].QMPPath, "--snapshot-mode", "quiesced", "--quiesce", "fallback", "--json")
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		warned := strings.Contains(strings.Join(v.Warnings, ";"), "guest agent did not quiesce")
		if v.SnapshotMode != "quiesced" || v.SnapshotModeAchieved != want.achieved || warned != (want.warning != "") {
			t.Fatalf("%s: requested %q achieved %q, warnings %v; want quiesced/%s", v.VM, v.SnapshotMode, v.SnapshotModeAchieved, v.Warnings, want.achieved)
		}
		wantModes(t, e, v.ID, "quiesced", want.achieved, want.column)
		// The plain report names what the point holds too.
		out = e.Must("backup", "vm", vms[i].QMPPath, "--snapshot-mode", "quiesced", "--quiesce", "fallback")
		if !strings.Contains(out, "incremental "+want.column+",") {
			t.Fatalf("backup report lacks %q: %s", want.column, out)
		}
	}
}

// TestVSphereQuiesceWithoutToolsRecordsCrashConsistent runs a `snapshot:
// quiesced` policy (quiesce: fallback, the default) on a powered-on
// vcsim VM whose VMware Tools do not run: the job, the point and the
// catalog record quiesced requested, crash-consistent achieved.
func TestVSphereQuiesceWithoutToolsRecordsCrashConsistent(t *testing.T) {
	srv := vclab.Start(t, 1, 1)
	lab := clitest.NewVCLab(t, srv)
	vm := lab.VMs[0]
	lab.Power(vm, true)
	e := clitest.NewEnv(t)
	e.Must("init")
	job := lab.BackUp(e, vm.Name, "quiesced")
	if len(job.Tasks) != 1 {
		t.Fatalf("job %+v", job)
	}
	tk := job.Tasks[0]
	if tk.SnapshotMode != "quiesced" || tk.SnapshotModeAchieved != "crash-consistent" ||
		!strings.Contains(strings.Join(tk.Warnings, ";"), "VMware Tools not running") {
		t.Fatalf("task: requested %q achieved %q, warnings %v", tk.SnapshotMode, tk.SnapshotModeAchieved, tk.Warnings)
	}
	wantModes(t, e, tk.PointID, "quiesced", "crash-consistent", "crash-consistent (quiesced requested)")
	var shown api.Job
	if err := json.Unmarshal([]byte(e.Must("job", "show", fmt.Sprint(job.ID), "--json")), &shown); err != nil {
		t.Fatal(err)
	}
	if got := shown.Tasks[0]; got.SnapshotMode != "quiesced" || got.SnapshotModeAchieved != "crash-consistent" {
		t.Fatalf("job show --json: requested %q achieved %q", got.SnapshotMode, got.SnapshotModeAchieved)
	}
	if out := e.Must("job", "show", fmt.Sprint(job.ID)); !strings.Contains(out, "crash-consistent (quiesced requested)") {
		t.Fatalf("job show does not show the fallback:\n%s", out)
	}
}

// A disk image is read as it is (as-is achieved, nothing requested). A
// manifest written before coffer recorded the achieved mode shows
// "unknown", never the requested mode it may not have reached, in the
// listing, --json and, after a catalog rebuild, the catalog.
func TestAchievedModeOfDiskImagesAndOldManifests(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	img := e.Image("web.raw", 8<<20, 1)
	var v api.BackupPoint
	if err := json.Unmarshal([]byte(e.Must("backup", "disk", img, "--json")), &v); err != nil {
		t.Fatal(err)
	}
	wantModes(t, e, v.ID, "", "as-is", "as-is")

	// Rewrite the manifest as an earlier coffer wrote it: no
	// snapshot_mode_achieved, a requested mode that may not have held.
	ctx := context.Background()
	st, err := local.Open(e.Repo)
	if err != nil {
		t.Fatal(err)
	}
	r, err := repo.Open(ctx, st, []byte(e.Vars["COFFER_PASSWORD"]), repo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	x, err := id.Parse(v.ID)
	if err != nil {
		t.Fatal(err)
	}
	s, err := r.LoadPoint(ctx, x)
	if err != nil {
		t.Fatal(err)
	}
	s.SnapshotMode, s.SnapshotModeAchieved = "quiesced", ""
	if err := r.UpdatePoint(ctx, s); err != nil {
		t.Fatal(err)
	}
	st.Close() // as a coffer process would on exit
	e.Must("catalog", "rebuild")
	wantModes(t, e, v.ID, "quiesced", "unknown", "unknown (quiesced requested)")
}
