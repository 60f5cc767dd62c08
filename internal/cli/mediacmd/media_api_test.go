package mediacmd_test

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/cli/command"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// TestMediaThroughTheAPI: a virtual tape library of the configuration,
// driven through a real server process: its status, a cartridge labelled,
// a real backup point copied to tape, listed, verified and restored from
// the tape into the server's restore directory byte for byte, all named by
// the library's name; a directory of the server's host is no library
// through the API. The remote command line does the same through the
// server. A token whose role may not read data out (BackupOperator) is
// refused the restore, the file extraction, the label and the catalogue
// rebuild, and allowed what its role does; one that may copy but not read
// tapes copies and is refused the restore.
func TestMediaThroughTheAPI(t *testing.T) {
	e := clitest.NewEnv(t)
	e.Must("init")
	img := e.Image("a.img", 4<<20, 2)
	e.Must("backup", "disk", img, "--name", "a")
	point := clitest.SnapshotsJSON(t, e)[0].ID
	lib := mediaLibrary(e, 3, "16MiB")
	e.Config("media-libraries:\n  - {name: vtl1, kind: vtl, directory: " + lib + "}\n")
	fake := testutil.NewFakeMtx(t, 1, []string{"CFR201L8"}, 0)
	e.Vars["PATH"] = fake.Bin + string(os.PathListSeparator) + os.Getenv("PATH")
	// Ready once its engine runs too: a copy then takes its drive's slot
	// from that engine's limits.
	s := e.StartCoffer(func(s *clitest.ServerProc) bool {
		return s.URL != "" && (s.Fingerprint != "" || strings.HasPrefix(s.URL, "http://")) && strings.Contains(s.Stderr.String(), "coffer server started")
	}, 2*time.Minute, "server", "--listen", "127.0.0.1:0", "--log-level", "info")
	tok := e.AdminToken()

	var st api.MediaLibraryStatus
	if code, _ := s.Call(tok, "GET", "/media/libraries/vtl1/status", nil, &st); code != 200 || st.Library != "vtl1" || st.Kind != "vtl" ||
		len(st.Drives) != 1 || st.Drives[0].Full || !st.Slots[0].Full || st.Slots[0].Barcode != "CFR001L8" || st.Slots[3].Full {
		t.Fatalf("status: %d %+v", code, st)
	}
	if code, _ := s.Call(tok, "GET", "/media/libraries/"+url.PathEscape(lib)+"/status", nil, nil); code != 404 {
		t.Fatalf("a directory of the server's host as a library: %d, want 404", code)
	}

	if code, _ := s.Call(tok, "POST", "/media/libraries/vtl1/drives/0/load", api.MediaLoadRequest{Barcode: "CFR002L8"}, &st); code != 200 ||
		!st.Drives[0].Full || st.Drives[0].Barcode != "CFR002L8" || st.Slots[1].Full {
		t.Fatalf("load: %d %+v", code, st)
	}
	if code, _ := s.Call(tok, "POST", "/media/libraries/vtl1/drives/0/unload", nil, &st); code != 200 || st.Drives[0].Full || st.Slots[1].Barcode != "CFR002L8" {
		t.Fatalf("unload: %d %+v", code, st)
	}
	if code, _ := s.Call(tok, "POST", "/media/libraries/vtl1/drives/3/load", api.MediaLoadRequest{Barcode: "CFR002L8"}, nil); code != 400 {
		t.Fatalf("load into a drive the library does not have: %d", code)
	}
	if code, out, errOut := e.Remote(s, tok, "media", "load", "--library", "vtl1", "--drive", "0", "CFR003L8"); code != 0 ||
		!strings.Contains(out, "Data Transfer Element 0:Full (Storage Element 3 Loaded):VolumeTag = CFR003L8") {
		t.Fatalf("remote media load: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := e.Remote(s, tok, "media", "unload", "--library", "vtl1", "--drive", "0"); code != 0 || !strings.Contains(out, "Data Transfer Element 0:Empty") {
		t.Fatalf("remote media unload: %d %s %s", code, out, errOut)
	}

	var vol api.MediaVolume
	if code, _ := s.Call(tok, "POST", "/media/libraries/vtl1/label", api.MediaLabelRequest{Barcode: "CFR001L8", Pool: "weekly"}, &vol); code != 200 ||
		vol.Barcode != "CFR001L8" || vol.Library != "vtl1" || vol.Pool != "weekly" || vol.WORM {
		t.Fatalf("label: %d %+v", code, vol)
	}
	var cp api.MediaCopyResult
	code, _ := s.Call(tok, "POST", "/repositories/default/media-copy?library=vtl1",
		api.MediaCopyRequest{Pool: "weekly", Points: []string{point[:12]}, RetentionSeconds: 86400}, &cp)
	if code != 200 || len(cp.Copied) != 1 || cp.Copied[0] != point || len(cp.Volumes) != 1 || cp.Volumes[0].Barcode != "CFR001L8" ||
		time.Until(cp.Volumes[0].ProtectedUntil) < 23*time.Hour || len(cp.Segments) == 0 {
		t.Fatalf("copy to media: %d %+v", code, cp)
	}

	var vols []api.MediaVolume
	if code, _ := s.Call(tok, "GET", "/media/volumes?pool=weekly", nil, &vols); code != 200 || len(vols) != 1 || vols[0].Library != "vtl1" ||
		vols[0].Segments != len(cp.Segments) || vols[0].ProtectedUntil.Sub(cp.Volumes[0].ProtectedUntil).Abs() > time.Millisecond {
		t.Fatalf("volumes: %d %+v", code, vols)
	}
	// The copy's drive took a slot of the server's engine, whose pools the
	// metrics report: the library's, of its one drive.
	if m := s.Metrics(tok); !strings.Contains(m, `coffer_limit_slots{pool="library:vtl1"} 1`) ||
		!strings.Contains(m, `coffer_limit_slots_in_use{pool="library:vtl1"} 0`) {
		t.Fatalf("the library's drive pool is not among the engine's limits:\n%s", m)
	}

	var segs []api.MediaSegment
	if code, _ := s.Call(tok, "GET", "/media/contents?point="+point[:8], nil, &segs); code != 200 || len(segs) != len(cp.Segments) ||
		segs[0].PointID != point || segs[0].Barcode != "CFR001L8" {
		t.Fatalf("contents of the point: %d %+v", code, segs)
	}
	var rep api.MediaVerifyReport
	if code, _ := s.Call(tok, "POST", "/media/libraries/vtl1/volumes/CFR001L8/verify", nil, &rep); code != 200 || !rep.OK || rep.Blocks == 0 {
		t.Fatalf("verify: %d %+v", code, rep)
	}

	var rr api.MediaRestoreResult
	if code, _ := s.Call(tok, "POST", "/media/libraries/vtl1/points/"+point[:10]+"/restore", api.MediaRestoreRequest{To: "from-tape.img"}, &rr); code != 200 ||
		len(rr.Disks) != 1 || rr.BlocksRead != rr.BlocksNeeded {
		t.Fatalf("restore from media: %d %+v", code, rr)
	}
	restored := filepath.Join(e.Vars["COFFER_STATE_DIR"], "restores", "from-tape.img")
	if rr.Disks[0].Target != restored || !clitest.SameFile(t, restored, img) {
		t.Fatalf("the point restored from tape to %s differs from the backed-up image", rr.Disks[0].Target)
	}
	if code, _ := s.Call(tok, "POST", "/media/libraries/vtl1/points/"+point[:10]+"/restore", api.MediaRestoreRequest{To: "../out.img"}, nil); code != 400 {
		t.Fatalf("a restore out of the restore directory: %d", code)
	}
	var jobs []api.Job
	if code, _ := s.Call(tok, "GET", "/jobs?kind=media-restore", nil, &jobs); code != 200 || len(jobs) != 1 || jobs[0].Object != "/media/vtl1" ||
		jobs[0].Status != "success" {
		t.Fatalf("the restore's task: %d %+v", code, jobs)
	}

	// A library created through the API is used at once.
	lib2 := filepath.Join(e.Dir, "vtl2")
	e.Must("media", "vtl", "create", lib2, "--slots", "2", "--capacity", "16MiB")
	e.Must("media", "vtl", "add", lib2, "CFR101L8", "--slot", "2", "--worm")
	var obj api.ConfigObject
	if code, _ := s.Call(tok, "POST", "/media/libraries", map[string]any{"name": "vtl2", "kind": "vtl", "directory": "vtl2"}, &obj); code != 400 {
		t.Fatalf("a library with a relative directory: %d", code)
	}
	if code, _ := s.Call(tok, "POST", "/media/libraries", map[string]any{"name": "vtl2", "kind": "vtl", "directory": lib2}, &obj); code != 201 ||
		obj.Kind != "media-library" || obj.Source != "catalog" || len(obj.Warnings) != 0 {
		t.Fatalf("create a library: %d %+v", code, obj)
	}
	// A real library: refused with what to change, then created; its
	// missing drive device is a warning, its changer answers.
	robot := map[string]any{"name": "robot", "kind": "mtx", "changer": fake.Changer,
		"drives": []map[string]any{{"number": 0, "device": filepath.Join(e.Dir, "nst0")}, {"number": 0, "device": filepath.Join(e.Dir, "nst1")}}}
	var problem map[string]any
	if code, _ := s.Call(tok, "POST", "/media/libraries", robot, &problem); code != 400 || !strings.Contains(fmt.Sprint(problem), "drives[1]: drive 0 is named twice") {
		t.Fatalf("a real library naming a drive twice: %d %+v", code, problem)
	}
	robot["drives"] = robot["drives"].([]map[string]any)[:1]
	if code, _ := s.Call(tok, "POST", "/media/libraries", robot, &obj); code != 201 || len(obj.Warnings) != 1 ||
		!strings.Contains(obj.Warnings[0], "drive 0: stat "+filepath.Join(e.Dir, "nst0")) {
		t.Fatalf("create a real library: %d %+v", code, obj)
	}
	if code, _ := s.Call(tok, "GET", "/media/libraries/robot/status", nil, &st); code != 200 || st.Kind != "mtx" || st.Slots[0].Barcode != "CFR201L8" {
		t.Fatalf("status of the real library created through the API: %d %+v", code, st)
	}

	// One whose directory holds no library is valid, and says it will
	// not work on this server.
	if code, _ := s.Call(tok, "POST", "/media/libraries", map[string]any{"name": "later", "kind": "vtl", "directory": filepath.Join(e.Dir, "none")}, &obj); code != 201 ||
		len(obj.Warnings) != 1 || !strings.Contains(obj.Warnings[0], "no virtual tape library there") {
		t.Fatalf("create a library without its directory: %d %+v", code, obj)
	}
	if code, _ := s.Call(tok, "GET", "/media/libraries/later/status", nil, nil); code != 404 {
		t.Fatalf("the status of a library without its directory: %d", code)
	}
	if code, _ := s.Call(tok, "GET", "/media/libraries/vtl2/status", nil, &st); code != 200 || st.Library != "vtl2" || !st.Slots[1].WORM ||
		st.Slots[1].Barcode != "CFR101L8" {
		t.Fatalf("status of the library created through the API: %d %+v", code, st)
	}
	if code, _ := s.Call(tok, "POST", "/media/libraries/vtl2/label", api.MediaLabelRequest{Barcode: "CFR101L8", Pool: "archive"}, &vol); code != 200 ||
		!vol.WORM || vol.Library != "vtl2" {
		t.Fatalf("label of a WORM cartridge: %d %+v", code, vol)
	}

	// The remote command line names the library as the server knows it.
	if code, out, errOut := e.Remote(s, tok, "media", "volumes", "--json"); code != 0 || !strings.Contains(out, `"library": "vtl1"`) {
		t.Fatalf("remote media volumes: %d %s %s", code, out, errOut)
	}
	if code, out, errOut := e.Remote(s, tok, "media", "restore", "--library", "vtl1", point[:10], "--to", "remote.img"); code != 0 ||
		!strings.Contains(out, "restored") || !clitest.SameFile(t, filepath.Join(e.Vars["COFFER_STATE_DIR"], "restores", "remote.img"), img) {
		t.Fatalf("remote media restore: %d %s %s", code, out, errOut)
	}
	if code, _, errOut := e.Remote(s, tok, "media", "restore", "--library", lib, point[:10], "--to", "x.img"); code != command.ExitNoRepo ||
		!strings.Contains(errOut, "no media library") {
		t.Fatalf("remote media restore from a directory: %d %s", code, errOut)
	}
	if code, _, errOut := e.Remote(s, tok, "media", "restore", "--library", "vtl1", "--stage-dir", e.Dir, point[:10], "--to", "x.img"); code != command.ExitUsage ||
		!strings.Contains(errOut, "--stage-dir") {
		t.Fatalf("remote media restore with a local stage directory: %d %s", code, errOut)
	}

	// A backup operator checks tapes but reads nothing out of them, nor
	// erases them.
	backup := strings.TrimSpace(e.Must("token", "create", "--user", "admin", "--grant", "/=BackupOperator"))
	if code, _ := s.Call(backup, "GET", "/media/libraries/vtl1/status", nil, &st); code != 200 {
		t.Fatalf("the backup operator's status: %d", code)
	}
	if code, _ := s.Call(backup, "GET", "/media/volumes", nil, &vols); code != 200 || len(vols) != 2 {
		t.Fatalf("the backup operator's volumes: %d %+v", code, vols)
	}
	// An auditor of one library sees its volumes and what is on them,
	// and no other library's.
	one := strings.TrimSpace(e.Must("token", "create", "--user", "admin", "--grant", "/media/vtl2=Auditor"))
	if code, _ := s.Call(one, "GET", "/media/volumes", nil, &vols); code != 200 || len(vols) != 1 || vols[0].Library != "vtl2" {
		t.Fatalf("vtl2's auditor's volumes: %d %+v", code, vols)
	}
	if code, _ := s.Call(one, "GET", "/media/contents", nil, &segs); code != 200 || len(segs) != 0 {
		t.Fatalf("vtl2's auditor sees the segments of vtl1's volume: %d %+v", code, segs)
	}
	if code, _ := s.Call(one, "GET", "/media/libraries/vtl1/status", nil, nil); code != 403 {
		t.Fatalf("vtl2's auditor's status of vtl1: %d", code)
	}
	if code, _ := s.Call(backup, "POST", "/media/libraries/vtl1/volumes/CFR001L8/verify", nil, &rep); code != 200 || !rep.OK {
		t.Fatalf("the backup operator's verify: %d %+v", code, rep)
	}
	for _, c := range []struct {
		path string
		body any
		priv string
	}{
		{"/media/libraries/vtl1/points/" + point[:10] + "/restore", api.MediaRestoreRequest{To: "denied.img"}, "Repo.Read on /media/vtl1"},
		{"/media/libraries/vtl1/points/" + point[:10] + "/files/extract", api.FilesExtractRequest{Paths: []string{"/"}, To: "denied"}, "Repo.Read on /media/vtl1"},
		{"/media/libraries/vtl1/label", api.MediaLabelRequest{Barcode: "CFR002L8", Pool: "weekly"}, "Repo.Modify on /media/vtl1"},
		{"/media/libraries/vtl1/catalog/rebuild", api.MediaCatalogRequest{}, "Repo.Modify on /media/vtl1"},
		{"/repositories/default/media-copy?library=vtl1", api.MediaCopyRequest{Pool: "weekly"}, "Repo.Read on /repositories/default"},
	} {
		var prob struct{ Detail, Class string }
		if code, _ := s.Call(backup, "POST", c.path, c.body, &prob); code != 403 || prob.Class != "denied" || !strings.Contains(prob.Detail, "lacks "+c.priv) {
			t.Errorf("the backup operator's POST %s: %d %+v, want 403 naming %s", c.path, code, prob, c.priv)
		}
	}
	if _, err := os.Stat(filepath.Join(e.Vars["COFFER_STATE_DIR"], "restores", "denied.img")); err == nil {
		t.Fatal("a refused restore wrote its target")
	}

	// Reading the repository and writing tapes copies; it does not read
	// the tapes.
	copier := strings.TrimSpace(e.Must("token", "create", "--user", "admin", "--grant", "/media=BackupOperator",
		"--grant", "/repositories=RestoreOperator"))
	if code, _ := s.Call(copier, "POST", "/repositories/default/media-copy?library=vtl1", api.MediaCopyRequest{Pool: "weekly"}, &cp); code != 200 ||
		len(cp.Copied) != 1 {
		t.Fatalf("the copier's copy: %d %+v", code, cp)
	}
	if code, _ := s.Call(copier, "POST", "/media/libraries/vtl1/points/"+point[:10]+"/restore", api.MediaRestoreRequest{To: "copier.img"}, nil); code != 403 {
		t.Fatalf("the copier's restore from tape: %d, want 403", code)
	}
}
