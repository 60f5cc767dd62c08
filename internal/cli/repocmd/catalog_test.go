package repocmd_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
)

func catalogPointsJSON(t *testing.T, e *clitest.Env, args ...string) []api.BackupPoint {
	t.Helper()
	var v []api.BackupPoint
	out := e.Must(append([]string{"catalog", "points", "--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return v
}

func TestCatalogRebuildAndPoints(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	a := e.Image("a.img", 4<<20, 1)
	b := e.Image("b.img", 4<<20, 1)
	e.Must("backup", "disk", a, "--name", "a")
	e.Must("backup", "disk", b, "--name", "b")
	e.Must("backup", "disk", a, "--name", "a")
	snaps := clitest.SnapshotsJSON(t, e) // oldest first
	// Every backup recorded its point.
	recorded := catalogPointsJSON(t, e)
	if len(recorded) != 3 || recorded[0].ID != snaps[2].ID || recorded[2].ID != snaps[0].ID {
		t.Fatalf("points recorded by the backups: %+v", recorded)
	}
	// A lost catalog is rebuilt from the repository, to the same points.
	if err := os.Remove(e.Vars["COFFER_CATALOG"]); err != nil {
		t.Fatal(err)
	}
	if pts := catalogPointsJSON(t, e); len(pts) != 0 {
		t.Fatalf("%d points in a new catalog", len(pts))
	}
	if out := e.Must("catalog", "rebuild"); !strings.Contains(out, "3 backup point(s)") {
		t.Fatalf("rebuild output: %s", out)
	}
	if pts := catalogPointsJSON(t, e); !reflect.DeepEqual(pts, recorded) {
		t.Fatalf("rebuilt points differ from recorded ones:\n rebuilt  %+v\n recorded %+v", pts, recorded)
	}
	pts := catalogPointsJSON(t, e, "--vm", "a")
	if len(pts) != 2 || pts[0].ID != snaps[2].ID || pts[1].ID != snaps[0].ID || pts[0].Parent != snaps[0].ID ||
		pts[0].LogicalBytes != 4<<20 || pts[0].DiskCount != 1 {
		t.Fatalf("points of a: %+v\nsnapshots: %+v", pts, snaps)
	}
	if pts := catalogPointsJSON(t, e, "--limit", "1"); len(pts) != 1 || pts[0].ID != snaps[2].ID {
		t.Fatalf("--limit 1: %+v", pts)
	}
	if out := e.Must("catalog", "points"); !strings.Contains(out, snaps[1].ShortID) || !strings.Contains(out, "3 backup point(s)") {
		t.Fatalf("table output:\n%s", out)
	}

	// A damaged manifest: the rebuild records the others and exits 5.
	manifest := filepath.Join(e.Repo, "snapshots", snaps[1].ID)
	if _, err := os.Stat(manifest); err != nil {
		t.Fatalf("manifest layout changed: %v", err)
	}
	if err := os.WriteFile(manifest, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := e.Expect(command.ExitIntegrity, "catalog", "rebuild", "--json")
	var res api.CatalogRebuild
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Points != 2 || len(res.Skipped) != 1 || res.Skipped[0].PointID != snaps[1].ID {
		t.Fatalf("rebuild --json = %s (%v)", out, err)
	}
	if pts := catalogPointsJSON(t, e); len(pts) != 2 {
		t.Fatalf("%d points after rebuilding around a damaged manifest", len(pts))
	}
}

// Without a catalog setting the catalog lives in the configured state
// directory.
func TestCatalogDefaultsToStateDir(t *testing.T) {
	e := clitest.NewEnv(t)
	delete(e.Vars, "COFFER_CATALOG")
	e.Vars["COFFER_STATE_DIR"] = filepath.Join(e.Dir, "state")
	e.Must("init")
	e.Must("backup", "disk", e.Image("a.img", 2<<20, 1), "--name", "a")
	e.Must("catalog", "rebuild")
	if _, err := os.Stat(filepath.Join(e.Dir, "state", "catalog.db")); err != nil {
		t.Fatalf("catalog not in the state directory: %v", err)
	}
	if pts := catalogPointsJSON(t, e); len(pts) != 1 {
		t.Fatalf("%d points", len(pts))
	}
}
