package workercmd_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
)

// routeConfig is a simulated KVM estate of two hosts (its VMs read only
// on their host), one policy, and a virtual tape library (LIBRARY).
const routeConfig = `
maintenance: {worker-dead-after: 10s}
connections:
  - {name: kvm, kind: fake-kvm, options: {seed: 7, vms: 6, hosts: 2, datastores: 1, disk-size: 256KiB, snapshot-create: 100ms}}
policies:
  - {name: fleet, connections: [kvm], schedule: "0 3 1 1 *", retries: {attempts: 3, backoff: 100ms, max-backoff: 100ms}}
media-libraries:
  - {name: vtl1, kind: vtl, directory: LIBRARY}
`

// routeWorkers are the workers of the estate's hosts; kvm1 has the tape
// library attached.
var routeWorkers = map[string]string{"host-01": "kvm1", "host-02": "kvm2"}

// TestRestoresAndTapeCopiesGoWhereTheyBelong: with no worker named, a
// restore of a VM's disk through the server runs on the worker of the
// VM's host (the target lands under that worker's restore directory, and
// the server's job says so), byte for byte the disk a local restore
// writes; once that worker drains, the same restore runs on the server,
// and a restore onto the workers' connection fails naming the host no
// ready worker reaches. A copy to tape runs on the worker the library is
// attached to, which records nothing itself (its token may not write the
// media catalogue): the server records its volumes, refuses to open the
// library itself, and the tape restores the point byte for byte.
func TestRestoresAndTapeCopiesGoWhereTheyBelong(t *testing.T) {
	e, address := tokenEnv(t)
	lib := filepath.Join(e.Dir, "vtl")
	e.Must("media", "vtl", "create", lib, "--slots", "4", "--capacity", "64MiB")
	e.Must("media", "vtl", "add", lib, "CFR001L8", "--slot", "1")
	e.Config(strings.Replace(routeConfig, "LIBRARY", lib, 1))
	srv := e.StartServer()
	waitLog(t, srv, "River's schema migrated", "coffer server started") // before the workers, which never migrate it
	token := e.AdminToken()
	cat := openCatalog(t, e)
	restoreDir := map[string]string{}
	for host, name := range routeWorkers {
		_, tokenFile := createToken(e, name)
		restoreDir[name] = t.TempDir()
		args := []string{"worker", "--catalog", address, "--token-file", tokenFile, "--slots", "2", "--reach-connections", "kvm",
			"--reach-hosts", "kvm/" + host, "--restore-dir", restoreDir[name], "--heartbeat", tokenBeat.String(),
			"--dead-after", tokenDead.String(), "--log-level", "info"}
		if name == "kvm1" {
			args = append(args, "--reach-libraries", "vtl1")
		}
		e.StartCoffer(func(s *clitest.ServerProc) bool { return strings.Contains(s.Stderr.String(), "worker registered") }, patience, args...)
	}
	waitLog(t, srv, "the engine given both workers", "workers=kvm1,kvm2")
	run := runBounded(t, srv, token)
	if run.Status != "success" || run.TasksOK != 6 {
		t.Fatalf("the policy's run: %+v\n%s", run, srv.Log())
	}
	points := pointsByHost(t, cat, run.ID)
	t.Logf("restoring a point of a VM of each of %d host(s): %v", len(points), points)

	for host, point := range points {
		worker := routeWorkers[host]
		there := restoreJSON(t, e, srv, token, point, "--disk", "0", "--to", host+".raw")
		if !strings.HasPrefix(there.Target, restoreDir[worker]+string(filepath.Separator)) {
			t.Fatalf("a restore of a VM of %s wrote %s, not under %s's restore directory %s", host, there.Target, worker, restoreDir[worker])
		}
		if ran := restoreWorker(t, cat); ran != worker {
			t.Fatalf("the restore job of a VM of %s says it ran on %q, not %s", host, ran, worker)
		}
		local := filepath.Join(e.Dir, host+"-local.raw")
		e.Must("restore", point, "--disk", "0", "--to", local)
		sameFile(t, there.Target, local)
		t.Logf("the restore of a VM of %s ran on %s: %s", host, worker, there.Target)
	}

	// kvm2 drains: a restore to a path runs on the server, one onto the
	// workers' connection is refused, naming why.
	e.Must("workers", "drain", "kvm2")
	waitWorker(t, cat, "kvm2", "draining", func(w catalog.Worker) bool { return w.State == catalog.WorkerDraining })
	if point, ok := points["host-02"]; ok {
		here := restoreJSON(t, e, srv, token, point, "--disk", "0", "--to", "drained.raw")
		for _, dir := range restoreDir {
			if strings.HasPrefix(here.Target, dir) {
				t.Errorf("with kvm2 draining, the restore went to a worker: %s", here.Target)
			}
		}
		code, _, stderr := e.Remote(srv, token, "restore", "vm", point, "--connection", "kvm")
		// A drained worker with nothing to finish deregisters at once:
		// the refusal names it only while it is still registered.
		if code != 2 || !strings.Contains(stderr, "no ready worker reaches host host-02") ||
			(!strings.Contains(stderr, "kvm2 (draining)") && stillRegistered(t, cat, "kvm2")) {
			t.Errorf("a restore onto the workers' connection with kvm2 draining: exit %d, %s", code, stderr)
		}
	}

	tapeCopyRunsOnTheLibrarysWorker(t, e, srv, token, cat, lib, points)
}

// tapeCopyRunsOnTheLibrarysWorker copies a point to tape through the
// server, whose library is kvm1's.
func tapeCopyRunsOnTheLibrarysWorker(t *testing.T, e *clitest.Env, srv *clitest.ServerProc, token string, cat catalog.Catalog, lib string,
	points map[string]string) {
	t.Helper()
	var point string
	for _, p := range points {
		point = p
	}
	code, stdout, stderr := e.Remote(srv, token, "media", "copy", "--library", "vtl1", "--pool", "weekly", "--retention", "1d", point, "--json")
	var cp api.MediaCopyResult
	if code != 0 || json.Unmarshal([]byte(stdout), &cp) != nil || len(cp.Copied) != 1 || len(cp.Volumes) != 1 || cp.Volumes[0].Barcode != "CFR001L8" {
		t.Fatalf("media copy through the server: exit %d\n%s\n%s\n%s", code, stdout, stderr, srv.Log())
	}
	jobs, err := cat.ListJobs(context.Background(), catalog.JobFilter{Kind: "media-copy"})
	if err != nil || len(jobs) != 1 || jobs[0].Status != catalog.StatusSuccess || !jobSays(t, cat, jobs[0].ID, "media-copy runs on worker kvm1") {
		t.Fatalf("the media-copy job: %+v, %v", jobs, err)
	}
	vols, err := cat.ListMediaVolumes(context.Background(), "weekly")
	if err != nil || len(vols) != 1 || vols[0].Library != "vtl1" || vols[0].Segments != 1 {
		t.Fatalf("the media catalogue after the copy on kvm1: %+v, %v", vols, err)
	}
	code, _, stderr = e.Remote(srv, token, "media", "verify", "--library", "vtl1", "CFR001L8")
	if code != 0 || !jobOnWorker(t, cat, "media-verify", "kvm1") {
		t.Errorf("the verify of kvm1's library through the server: exit %d, %s", code, stderr)
	}
	// The tape, read on this host without the repository, holds the point.
	fromTape := filepath.Join(e.Dir, "tape.raw")
	e.Must("media", "restore", "--library", lib, point, "--disk", "0", "--to", fromTape)
	local := filepath.Join(e.Dir, "tape-local.raw")
	e.Must("restore", point, "--disk", "0", "--to", local)
	sameFile(t, fromTape, local)
}

// pointsByHost is a point of the run of job for a VM of each host.
func pointsByHost(t *testing.T, cat catalog.Catalog, job int64) map[string]string {
	t.Helper()
	tasks, err := cat.ListTasks(context.Background(), catalog.TaskFilter{JobID: job})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, task := range tasks {
		if task.BackupPointID != "" && routeWorkers[task.Host] != "" {
			out[task.Host] = task.BackupPointID
		}
	}
	if len(out) == 0 {
		t.Fatalf("no point of a VM of host-01 or host-02 in job %d: %+v", job, tasks)
	}
	return out
}

// restoreWorker is the worker the newest restore job says it ran on.
func restoreWorker(t *testing.T, cat catalog.Catalog) string {
	t.Helper()
	jobs, err := cat.ListJobs(context.Background(), catalog.JobFilter{Kind: "restore"})
	if err != nil || len(jobs) == 0 || jobs[0].Status != catalog.StatusSuccess {
		t.Fatalf("restore jobs: %+v, %v", jobs, err)
	}
	for _, name := range routeWorkers {
		if jobSays(t, cat, jobs[0].ID, "restore-disk runs on worker "+name) {
			return name
		}
	}
	return ""
}

// jobSays reports whether job's log holds a line containing want.
func jobSays(t *testing.T, cat catalog.Catalog, job int64, want string) bool {
	t.Helper()
	evs, err := cat.ListEvents(context.Background(), catalog.EventFilter{JobID: job})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if strings.Contains(ev.Message, want) {
			return true
		}
	}
	return false
}

// sameFile fails the test unless a and b hold the same bytes, and some.
func sameFile(t *testing.T, a, b string) {
	t.Helper()
	da, errA := os.ReadFile(a)
	db, errB := os.ReadFile(b)
	if errA != nil || errB != nil || len(da) == 0 || !bytes.Equal(da, db) {
		t.Fatalf("%s (%d bytes, %v) differs from %s (%d bytes, %v)", a, len(da), errA, b, len(db), errB)
	}
}

// stillRegistered reports whether the registry still lists worker name.
func stillRegistered(t *testing.T, cat catalog.Catalog, name string) bool {
	t.Helper()
	ws, err := cat.ListWorkers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(ws, func(w catalog.Worker) bool { return w.Name == name })
}
