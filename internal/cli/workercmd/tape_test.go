package workercmd_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
)

// tapeConfig is one simulated KVM host, one policy, and a virtual tape
// library (LIBRARY) attached to the host's worker.
const tapeConfig = `
maintenance: {worker-dead-after: 10s}
connections:
  - {name: kvm, kind: fake-kvm, options: {seed: 7, vms: 2, hosts: 1, datastores: 1, disk-size: 256KiB}}
policies:
  - {name: fleet, connections: [kvm], schedule: "0 3 1 1 *", retries: {attempts: 1}}
media-libraries:
  - {name: vtl1, kind: vtl, directory: LIBRARY}
`

// TestTapeOnTheLibrarysWorker: a library attached to a worker (tape1,
// --reach-libraries) is opened there only, and the media commands run
// through the server on it: the library's status, a cartridge's label,
// a copy, the volume's verify, a restore from tape and the catalogue's
// rebuild each run on tape1 (its log says so; the jobs say so; the
// restore lands under tape1's restore directory, byte for byte the
// disk a restore from the repository writes), and the server records in
// the media catalogue what tape1 labelled, wrote and read, which the
// worker's own token may neither read nor write.
func TestTapeOnTheLibrarysWorker(t *testing.T) {
	e, address := tokenEnv(t)
	lib := filepath.Join(e.Dir, "vtl")
	e.Must("media", "vtl", "create", lib, "--slots", "4", "--capacity", "64MiB")
	for i, code := range []string{"CFR001L8", "CFR002L8"} {
		e.Must("media", "vtl", "add", lib, code, "--slot", []string{"1", "2"}[i])
	}
	e.Config(strings.Replace(tapeConfig, "LIBRARY", lib, 1))
	srv := e.StartServer()
	waitLog(t, srv, "River's schema migrated", "coffer server started") // before the worker, which never migrates it
	admin := e.AdminToken()
	cat := openCatalog(t, e)
	token, tokenFile := createToken(e, "tape1")
	restoreDir := t.TempDir()
	w := e.StartCoffer(func(s *clitest.ServerProc) bool { return strings.Contains(s.Stderr.String(), "worker registered") }, patience,
		"worker", "--catalog", address, "--token-file", tokenFile, "--slots", "2", "--reach-connections", "kvm",
		"--reach-hosts", "kvm/host-01", "--reach-libraries", "vtl1", "--restore-dir", restoreDir,
		"--heartbeat", tokenBeat.String(), "--dead-after", tokenDead.String(), "--log-level", "info")
	waitLog(t, srv, "the engine given the worker", "the engine places units on the workers", "workers=tape1")
	run := runBounded(t, srv, admin)
	if run.Status != "success" || run.TasksOK != 2 {
		t.Fatalf("the policy's run: %+v\n%s", run, srv.Log())
	}
	point := pointsByHost(t, cat, run.ID)["host-01"]
	remote := func(v any, args ...string) {
		t.Helper()
		code, stdout, stderr := e.Remote(srv, admin, append(args, "--json")...)
		if code != 0 || json.Unmarshal([]byte(stdout), v) != nil {
			t.Fatalf("%v through the server: exit %d\n%s\n%s\nserver:\n%s\ntape1:\n%s", args, code, stdout, stderr, srv.Log(), w.Log())
		}
	}

	var st api.MediaLibraryStatus
	remote(&st, "media", "vtl", "status", "--library", "vtl1")
	if st.Library != "vtl1" || len(st.Slots) < 2 || st.Slots[0].Barcode != "CFR001L8" || st.Slots[1].Barcode != "CFR002L8" {
		t.Errorf("the library's status through the server: %+v", st)
	}
	var labelled api.MediaVolume
	remote(&labelled, "media", "label", "--library", "vtl1", "--barcode", "CFR002L8", "--pool", "monthly")
	if vols, err := cat.ListMediaVolumes(context.Background(), "monthly"); err != nil || len(vols) != 1 || vols[0].Barcode != "CFR002L8" ||
		vols[0].Library != "vtl1" || labelled.Barcode != "CFR002L8" || labelled.MediaSet != vols[0].MediaSet {
		t.Fatalf("the media catalogue after the label on tape1: %+v, %v; the command's %+v", vols, err, labelled)
	}
	var cp api.MediaCopyResult
	remote(&cp, "media", "copy", "--library", "vtl1", "--pool", "weekly", "--retention", "1d", point)
	if len(cp.Volumes) != 1 || cp.Volumes[0].Barcode != "CFR001L8" {
		t.Fatalf("the copy to tape through the server: %+v", cp)
	}
	var rep api.MediaVerifyReport
	remote(&rep, "media", "verify", "--library", "vtl1", "CFR001L8")
	if !rep.OK || !rep.CatalogueMatches || rep.Blocks == 0 || !jobOnWorker(t, cat, "media-verify", "tape1") {
		t.Errorf("the verify on tape1: %+v", rep)
	}
	tapeRestoreOnTheWorker(t, e, srv, admin, cat, point, restoreDir, remote)
	rebuildOnTheWorker(t, cat, remote)

	for _, op := range []string{"media-library-status", "media-label", "media-verify", "media-restore", "rebuild-media-catalog"} {
		if !strings.Contains(w.Log(), `msg="a server's media operation runs here" operation=`+op) {
			t.Errorf("tape1's log does not say it ran %s:\n%s", op, w.Log())
		}
	}
	checkNoMediaCatalogue(t, address, token)
}

// tapeRestoreOnTheWorker restores the point from tape through the server:
// the disk lands under the worker's restore directory, as the
// repository's restore writes it.
func tapeRestoreOnTheWorker(t *testing.T, e *clitest.Env, srv *clitest.ServerProc, admin string, cat catalog.Catalog, point, restoreDir string,
	remote func(v any, args ...string)) {
	t.Helper()
	var res api.MediaRestoreResult
	remote(&res, "media", "restore", "--library", "vtl1", point, "--disk", "0", "--to", "tape.raw")
	if len(res.Disks) != 1 || !strings.HasPrefix(res.Disks[0].Target, restoreDir+string(filepath.Separator)) || !jobOnWorker(t, cat, "media-restore", "tape1") {
		t.Fatalf("the restore from tape through the server: %+v, not under tape1's %s", res, restoreDir)
	}
	local := filepath.Join(e.Dir, "repo.raw")
	e.Must("restore", point, "--disk", "0", "--to", local)
	sameFile(t, res.Disks[0].Target, local)
	t.Logf("the restore from tape ran on tape1: %s, %d block(s) read", res.Disks[0].Target, res.BlocksRead)
}

// rebuildOnTheWorker empties the media catalogue and rebuilds it through
// the server from the library's volumes, read on the worker.
func rebuildOnTheWorker(t *testing.T, cat catalog.Catalog, remote func(v any, args ...string)) {
	t.Helper()
	ctx := context.Background()
	before, err := cat.ListMediaVolumes(ctx, "")
	if err != nil || len(before) != 2 {
		t.Fatalf("the media catalogue before the rebuild: %+v, %v", before, err)
	}
	for _, v := range before {
		if err := cat.DeleteMediaVolume(ctx, v.Barcode); err != nil {
			t.Fatal(err)
		}
	}
	var res api.MediaCatalogResult
	remote(&res, "media", "catalog", "--library", "vtl1")
	after, err := cat.ListMediaVolumes(ctx, "")
	if err != nil || len(after) != 2 || len(res.Volumes) != 2 {
		t.Fatalf("the media catalogue rebuilt on tape1: %+v, %v; the command's %+v", after, err, res)
	}
	for i := range after {
		a, b := after[i], before[i]
		if a.Barcode != b.Barcode || a.Pool != b.Pool || a.MediaSet != b.MediaSet || a.Segments != b.Segments || a.Library != "vtl1" {
			t.Errorf("volume %s rebuilt as %+v, was %+v", b.Barcode, a, b)
		}
	}
}

// jobOnWorker reports whether the newest job of kind succeeded and says
// it ran on worker.
func jobOnWorker(t *testing.T, cat catalog.Catalog, kind, worker string) bool {
	t.Helper()
	jobs, err := cat.ListJobs(context.Background(), catalog.JobFilter{Kind: kind})
	if err != nil || len(jobs) == 0 || jobs[0].Status != catalog.StatusSuccess {
		t.Fatalf("%s jobs: %+v, %v", kind, jobs, err)
	}
	return jobSays(t, cat, jobs[0].ID, kind+" runs on worker "+worker)
}

// checkNoMediaCatalogue logs in with the worker's token, as a thief of it
// would: the media catalogue is out of its reach.
func checkNoMediaCatalogue(t *testing.T, address, token string) {
	t.Helper()
	ctx := context.Background()
	w, err := loginAs(t, address, token)
	if err != nil {
		t.Fatalf("log in with tape1's token: %v", err)
	}
	defer func() { _ = w.Close(ctx) }()
	for _, stmt := range []string{
		`SELECT * FROM media_volumes LIMIT 1`,
		`DELETE FROM media_segments`,
		`UPDATE media_volumes SET pool = 'stolen'`,
		`INSERT INTO media_volumes (barcode) VALUES ('EVIL01L8')`,
	} {
		if _, err := w.Exec(ctx, stmt); sqlState(err) != "42501" {
			t.Errorf("%s with a worker's token: %v, want permission denied", stmt, err)
		}
	}
}
