// Package fleetadopt measures what a fleet's retry stores again after the
// worker running a VM's attempt is killed (SIGKILL) part-way: the leader
// declares the worker lost, ends its repository sessions (their packs are
// indexed at once, repo.EndSessionsOf) and re-admits the attempt on
// another worker, whose backup then deduplicates against what the lost
// attempt stored. Without the end, the lost attempt's lease (another
// host's) would keep its packs unindexed for the lease's 10 minutes and
// the retry would store everything again.
//
// Run is the scenario, with real processes: PostgreSQL, `coffer server`,
// two `coffer worker`s on hosts of their own (testutil.NetLab: a network
// and host name namespace each), the simulated fleet (kind: fake) with a
// read delay so that a backup lasts seconds, and a repository on local
// disk or on a real S3 server (versitygw). internal/cli/workercmd's
// TestRetryStoresOnlyTheRest asserts its property; this package's
// TestReupload (COFFER_BENCH=1) measures it over rounds:
//
//	COFFER_BENCH=1 go test -count=1 -v -run TestReupload ./bench/fleetadopt/
package fleetadopt

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/api"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/config"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
	"github.com/coffer-backup/coffer/internal/id"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
	"github.com/coffer-backup/coffer/internal/store"
	storeall "github.com/coffer-backup/coffer/internal/store/all"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// Options shape a round.
type Options struct {
	// S3 puts the repository on a versitygw on the lab's gateway (else a
	// directory, which the hosts share).
	S3 bool
	// KillAt is the fraction of the disk's data the lost attempt has
	// stored (committed packs) when its worker is killed.
	KillAt float64
	// DiskSize is the simulated VM's disk (half of it holds data);
	// ReadDelay is waited per 64 KiB block read.
	DiskSize  string
	ReadDelay time.Duration
}

// Result is what a round measured, in bytes: plaintext chunk bytes
// (Raw) and pack files' sizes (Stored).
type Result struct {
	// Disk is the plaintext of the distinct chunks of the point the retry
	// committed: the full disk's data.
	Disk int64
	// Lost is what the killed attempt's session committed; Retry what the
	// retry's committed; Again the part of Retry whose chunks Lost held
	// already (stored again).
	LostRaw, LostStored   int64
	RetryRaw, RetryStored int64
	AgainRaw              int64
	// Adopted is the leader's log line of the sessions it ended.
	Adopted string
	// Worker is the worker killed, RetryWorker the one the retry ran on.
	Worker, RetryWorker string
}

// Ratio is the bytes stored again as a fraction of what the lost attempt
// stored.
func (r Result) Ratio() float64 {
	if r.LostRaw == 0 {
		return 0
	}
	return float64(r.AgainRaw) / float64(r.LostRaw)
}

const (
	beat     = 200 * time.Millisecond
	dead     = 2 * time.Second
	patience = 2 * time.Minute // bounds every wait: only catches a hang
	password = "correct horse"
)

// Run runs one round: a first backup of the VM, on a worker killed once
// its session's packs hold KillAt of the disk's data, retried on the
// other worker. It checks the repository afterwards (verify --read-data,
// gc, verify) and returns what each attempt stored.
func Run(t *testing.T, o Options) Result {
	t.Helper()
	lab := testutil.NewNetLab(t, "kvm1", "kvm2")
	dsn := testutil.StartPostgresOnLab(t, lab)
	e := clitest.NewEnv(t)
	e.Vars["COFFER_CATALOG"] = dsn
	if o.S3 {
		s3 := testutil.StartS3OnLab(t, lab)
		e.Repo = "s3://" + s3.Bucket(t, false) + "/repo"
		e.Vars["COFFER_REPO"] = e.Repo
		for k, v := range s3.Env() {
			e.Vars[k] = v
		}
	}
	e.Must("init", "--pack-size", "1MiB")
	e.Config(configOf(o))
	srv := e.StartServer()
	token := e.AdminToken()
	workers := map[string]*clitest.ServerProc{}
	for _, h := range lab.Hosts() {
		e.Host = h
		workers[h.Name] = startWorker(e, h.Name)
	}
	e.Host = nil
	waitLog(t, srv, "the engine given both workers", "workers=kvm1,kvm2")
	r := openRepo(t, e)
	data := diskData(t, o)

	done := make(chan api.Job, 1)
	go func() { done <- srv.RunPolicy(token, "adopt") }()
	lost, owner := waitStored(t, r, int64(o.KillAt*float64(data)))
	res := Result{Worker: workerOf(owner)}
	w := workers[res.Worker]
	if w == nil {
		t.Fatalf("the session's owner %q is no worker of the lab", owner)
	}
	if err := w.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-w.Done
	var j api.Job
	select {
	case j = <-done:
	case <-time.After(patience):
		t.Fatalf("the run did not end after %s was killed\n%s", res.Worker, srv.Log())
	}
	if j.Status != "success" {
		t.Fatalf("the run with a killed worker: %+v\n%s", j, srv.Log())
	}
	res.Adopted = logLine(srv.Log(), "write sessions ended")
	measure(t, r, lost, &res)
	for name := range workers {
		if name != res.Worker {
			res.RetryWorker = name
		}
	}
	check(t, e)
	return res
}

func configOf(o Options) string {
	return fmt.Sprintf(`
maintenance: {worker-dead-after: %s}
connections:
  - {name: lab, kind: fake, options: {seed: 7, vms: 1, hosts: 1, datastores: 1, disk-size: %s, read-delay: %s}}
policies:
  - {name: adopt, connections: [lab], schedule: "0 3 1 1 *", retries: {attempts: 3, backoff: 100ms, max-backoff: 100ms}}
`, dead, o.DiskSize, o.ReadDelay)
}

// startWorker starts `coffer worker` on the env's host, reaching the
// simulated fleet, one unit at a time.
func startWorker(e *clitest.Env, name string) *clitest.ServerProc {
	e.T.Helper()
	registered := func(s *clitest.ServerProc) bool { return strings.Contains(s.Stderr.String(), "worker registered") }
	return e.StartCoffer(registered, patience, append([]string{"worker", "--name", name, "--slots", "1", "--reach-connections", "lab",
		"--heartbeat", beat.String(), "--dead-after", dead.String(), "--log-level", "info"}, e.WorkerLogin(name)...)...)
}

// diskData is the allocated bytes of the simulated VM's disks, read from
// a connector built as the workers build theirs (same seed).
func diskData(t *testing.T, o Options) int64 {
	t.Helper()
	ctx := context.Background()
	size, err := config.ParseSize(o.DiskSize)
	if err != nil {
		t.Fatal(err)
	}
	c := fake.New(fake.Options{Seed: 7, VMs: 1, Hosts: 1, Datastores: 1, DiskSize: size})
	vms, err := c.Inventory(ctx)
	if err != nil || len(vms) != 1 {
		t.Fatalf("the simulated fleet: %v, %v", vms, err)
	}
	s, err := c.Snapshot(ctx, hypervisor.VMRef{ID: vms[0].ID, Name: vms[0].Name}, hypervisor.SnapshotRequest{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = s.Close(ctx, true) }()
	var n int64
	for _, d := range s.Disks() {
		rd, err := s.OpenDisk(ctx, d.Key)
		if err != nil {
			t.Fatal(err)
		}
		ext, err := rd.Allocated(ctx)
		_ = rd.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range ext {
			n += x.Length
		}
	}
	return n
}

// openRepo opens the env's repository in this process, for reading its
// packs and leases.
func openRepo(t *testing.T, e *clitest.Env) *repo.Repository {
	t.Helper()
	ctx := context.Background()
	cfg := storeall.Config{}
	if strings.HasPrefix(e.Repo, "s3://") {
		cfg.S3 = storeall.S3Config{Endpoint: e.Vars["COFFER_S3_ENDPOINT"], PathStyle: true}
	}
	st, err := storeall.Open(ctx, cfg, e.Repo, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := repo.Open(ctx, st, []byte(password), repo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// waitStored waits until one session's committed packs hold at least
// want bytes and returns the session and its lease's owner.
func waitStored(t *testing.T, r *repo.Repository, want int64) (session, owner string) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(patience)
	for time.Now().Before(deadline) {
		sizes := map[string]int64{}
		if err := r.Store().List(ctx, "data/", func(fi store.ObjectInfo) error {
			if pid, err := repo.ParsePackObjectName(fi.Name); err == nil {
				sizes[pid.Session().String()] += fi.Size
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for s, n := range sizes {
			if n < want {
				continue
			}
			leases, err := r.Leases(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range leases {
				if l.Session == s {
					return s, l.Owner
				}
			}
			t.Fatalf("session %s stored %d bytes but holds no lease", s, n)
		}
		time.Sleep(20 * time.Millisecond) // a poll's pace, not a synchronisation
	}
	t.Fatalf("no session stored %d bytes within %s", want, patience)
	return "", ""
}

// workerOf is the worker of a session owner (fleet.SessionOwner).
func workerOf(owner string) string {
	var name string
	var epoch int64
	if _, err := fmt.Sscanf(owner, "worker %s epoch %d", &name, &epoch); err != nil {
		return ""
	}
	return name
}

// measure sums the packs of the lost session and of the others (the
// retry's), and the chunks the retry stored that the lost session held.
func measure(t *testing.T, r *repo.Repository, lost string, res *Result) {
	t.Helper()
	ctx := context.Background()
	if err := r.ReloadIndex(ctx); err != nil {
		t.Fatal(err)
	}
	type packInfo struct {
		id   repo.PackID
		size int64
	}
	var packs []packInfo
	if err := r.Store().List(ctx, "data/", func(fi store.ObjectInfo) error {
		if pid, err := repo.ParsePackObjectName(fi.Name); err == nil {
			packs = append(packs, packInfo{pid, fi.Size})
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	lostChunks := map[id.ID]bool{}
	retry := map[id.ID]int64{}
	for _, p := range packs {
		entries, err := r.PackEntries(ctx, p.id, p.size)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if p.id.Session().String() == lost {
				lostChunks[e.ID] = true
				res.LostRaw += int64(e.RawLength)
			} else {
				retry[e.ID] += int64(e.RawLength)
				res.RetryRaw += int64(e.RawLength)
			}
		}
		if p.id.Session().String() == lost {
			res.LostStored += p.size
		} else {
			res.RetryStored += p.size
		}
	}
	for x, n := range retry {
		if lostChunks[x] {
			res.AgainRaw += n
		}
	}
	for x := range repotest.Uses(t, r) {
		loc, ok, err := r.Index().Lookup(ctx, x)
		if err != nil || !ok {
			t.Fatalf("chunk %s of the point is not indexed: %v", x.Short(), err)
		}
		res.Disk += int64(loc.RawLength)
	}
}

// check verifies the repository's data, collects garbage and verifies
// again: the ended session's lease lives on until it expires, so gc
// defers its deletions, and nothing it did may break a point.
func check(t *testing.T, e *clitest.Env) {
	t.Helper()
	e.Must("verify", "--read-data")
	e.Must("gc")
	e.Must("verify", "--read-data")
}

// waitLog waits until the process has logged every one of wants.
func waitLog(t *testing.T, p *clitest.ServerProc, what string, wants ...string) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		log, all := p.Log(), true
		for _, w := range wants {
			all = all && strings.Contains(log, w)
		}
		if all {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s:\n%s", what, patience, log)
		}
		time.Sleep(50 * time.Millisecond) // a poll's pace, not a synchronisation
	}
}

func logLine(log, text string) string {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, text) {
			return l
		}
	}
	return ""
}
