package engine

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/backup"
	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/engine/enginetest"
	"github.com/coffer-backup/coffer/internal/hypervisor"
	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
	"github.com/coffer-backup/coffer/internal/repo/repotest"
)

func newRepo(t *testing.T) *repo.Repository {
	return repotest.New(t, repo.InitOptions{ChunkSize: 64 << 10})
}

type env struct {
	t    *testing.T
	fake *fake.Connector
	cat  *enginetest.Catalog
	repo *repo.Repository
	eng  *Engine
}

// newEnv builds an engine over one fake connection "lab" and a real local
// repository. mod may adjust the options before the engine starts.
func newEnv(t *testing.T, fo fake.Options, cfg *policy.Config, mod func(*Options)) *env {
	t.Helper()
	e := &env{t: t, fake: fake.New(fo), cat: enginetest.NewCatalog(), repo: newRepo(t)}
	if cfg == nil {
		cfg = &policy.Config{}
	}
	cfg.Connections = append(cfg.Connections, policy.Connection{Name: "lab", Kind: "fake"})
	o := Options{Config: cfg, Catalog: e.cat, Connectors: map[string]hypervisor.Connector{"lab": e.fake},
		OpenRepository:      func(context.Context, string) (*repo.Repository, error) { return e.repo, nil },
		StorageSnapshotters: map[string]hypervisor.StorageSnapshotter{"lab": e.fake.StorageSnapshotter()},
		FlushInterval:       5 * time.Millisecond, Workers: 2}
	if mod != nil {
		mod(&o)
	}
	eng, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	e.eng = eng
	t.Cleanup(func() { eng.Close() })
	return e
}

// testPolicy turns change tracking's self-check off: the engine's tests
// count the bytes an incremental reads, and the fake's disks are a few
// chunks, which a sample would read whole. The check has tests of its own
// (backup, qemu, and TestPolicyChangeCheck).
func testPolicy(name string) policy.Policy {
	return policy.Policy{Name: name, Connection: "lab", ChangeCheck: -1,
		Retries: policy.Retries{Attempts: 3, Backoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond}}
}

func (e *env) run(p policy.Policy) *Result {
	e.t.Helper()
	res, err := e.eng.Run(context.Background(), p)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

// noLeaks asserts that no hypervisor session and no coffer object is left.
func (e *env) noLeaks() {
	e.t.Helper()
	e.eng.bg.Wait() // calls abandoned after a timeout finish in the background
	if n := e.fake.Counters(); n.OpenSessions != 0 || n.StorageTaken != n.StorageFreed {
		e.t.Fatalf("leaked: %+v", n)
	}
	vms, _ := e.fake.Inventory(context.Background())
	for _, vm := range vms {
		for _, o := range e.fake.Objects(vm.Name) {
			if strings.HasPrefix(o, "coffer-") {
				e.t.Fatalf("object %s left on %s", o, vm.Name)
			}
		}
	}
}

// countingRunner wraps BackupVM and records the peak number of concurrent
// calls (the repository write streams in use).
type countingRunner struct {
	cur, peak atomic.Int32
}

func (c *countingRunner) run(ctx context.Context, w *repo.Writer, conn hypervisor.Connector, req backup.VMRequest, o backup.Options) (*repo.Point, error) {
	n := c.cur.Add(1)
	defer c.cur.Add(-1)
	for {
		p := c.peak.Load()
		if n <= p || c.peak.CompareAndSwap(p, n) {
			break
		}
	}
	return backup.BackupVM(ctx, w, conn, req, o)
}

func TestLimitsNeverExceeded(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			lat := fake.Latency{Min: 200 * time.Microsecond, Max: 4 * time.Millisecond}
			cfg := &policy.Config{
				Limits:         policy.Limits{Tasks: 9, PerHost: 4, PerDatastore: 2, PerRepository: 5},
				ResourceGroups: []policy.ResourceGroup{{Name: "ctrl-a", Datastores: []string{"ds-001", "ds-002"}, Limit: 2}},
			}
			cr := &countingRunner{}
			e := newEnv(t, fake.Options{Seed: seed, VMs: 48, Hosts: 3, Datastores: 7, MaxDisks: 2, DiskSize: 256 << 10, Allocated: 0.3,
				SnapshotCreate: lat, SnapshotRemove: lat}, cfg, func(o *Options) { o.Runner = cr.run })
			e.fake.TrackGroup("ctrl-a", func(vm hypervisor.VM) bool {
				return cfg.ResourceGroups[0].Contains(vm)
			})
			res := e.run(testPolicy("all"))
			if res.Job.Status != catalog.StatusSuccess || len(res.Tasks) != 48 {
				t.Fatalf("job %s (%s), %d tasks", res.Job.Status, res.Job.Error, len(res.Tasks))
			}
			p := e.fake.Peaks()
			t.Logf("peaks: total %d, host %d, datastore %d, group %d, streams %d", p.Total, p.MaxHost(), p.MaxDatastore(), p.Group["ctrl-a"], cr.peak.Load())
			if p.Total > 5 || p.MaxHost() > 4 || p.MaxDatastore() > 2 || p.Group["ctrl-a"] > 2 || cr.peak.Load() > 5 {
				t.Fatalf("a limit was exceeded: %+v, streams %d", p, cr.peak.Load())
			}
			if p.Total < 2 {
				t.Fatalf("no concurrency at all (peak %d): the test proves nothing", p.Total)
			}
			e.noLeaks()
		})
	}
}

func TestDispatcherSkipsBlockedUnits(t *testing.T) {
	d := newDispatcher(4)
	ds := d.resource("datastore:a", 1)
	release := make(chan struct{})
	started := make(chan string, 3)
	mk := func(name string, size int64, rs ...*resource) *unit {
		return &unit{needs: needsOf(append([]*resource{d.global}, rs...)...), size: size, run: func(u *unit) {
			started <- name
			<-release
			d.done(u)
		}}
	}
	// The biggest unit holds datastore a; the next one waits for it, but
	// must not keep the third (on another datastore) from starting.
	d.submit(mk("big-on-a", 30, ds), mk("mid-on-a", 20, ds), mk("small-on-b", 10, d.resource("datastore:b", 1)))
	got := map[string]bool{<-started: true, <-started: true}
	if !got["big-on-a"] || !got["small-on-b"] {
		t.Fatalf("started %v", got)
	}
	close(release)
	if n := <-started; n != "mid-on-a" {
		t.Fatalf("then started %s", n)
	}
}

func TestFailureIsolation(t *testing.T) {
	e := newEnv(t, fake.Options{Seed: 7, VMs: 8, DiskSize: 128 << 10}, nil, nil)
	vms, _ := e.fake.Inventory(context.Background())
	e.fake.FailVM(vms[1].Name, fmt.Errorf("datastore inaccessible"), -1)
	e.fake.FailReads(vms[4].Name, fmt.Errorf("NBD connection reset"))
	p := testPolicy("iso")
	p.Snapshot, p.Quiesce = string(hypervisor.Quiesced), string(hypervisor.QuiesceRequired)
	res := e.run(p)
	if res.Job.Status != catalog.StatusPartial {
		t.Fatalf("job status %s", res.Job.Status)
	}
	failed := map[string]string{}
	for _, tk := range res.Failed() {
		failed[tk.VMName] = tk.Error
	}
	// vms[3] and vms[7] have no guest agent (every 4th), and quiescing is required.
	want := map[string]string{vms[1].Name: "datastore inaccessible", vms[4].Name: "NBD connection reset",
		vms[3].Name: "guest quiesce failed", vms[7].Name: "guest quiesce failed"}
	if len(failed) != len(want) {
		t.Fatalf("failed: %v", failed)
	}
	for vm, why := range want {
		if !strings.Contains(failed[vm], why) || !strings.Contains(res.Job.Error, vm) {
			t.Errorf("%s: error %q, want %q; job error %q", vm, failed[vm], why, res.Job.Error)
		}
	}
	if res.Job.TasksOK != 4 || res.Job.TasksFail != 4 {
		t.Fatalf("job counts %+v", res.Job)
	}
	e.noLeaks()
	// Everything that failed is recorded in the catalog too.
	got, _ := e.cat.GetJob(context.Background(), res.Job.ID)
	if got.Status != catalog.StatusPartial || len(e.cat.EventsOf(res.Job.ID, "task-failed")) != 4 {
		t.Fatalf("catalog job %+v", got)
	}
}

func TestRetries(t *testing.T) {
	e := newEnv(t, fake.Options{Seed: 8, VMs: 3, DiskSize: 64 << 10}, nil, nil)
	vms, _ := e.fake.Inventory(context.Background())
	e.fake.FailVM(vms[0].Name, fmt.Errorf("%w: task in progress", hypervisor.ErrTransient), 2)
	e.fake.FailVM(vms[1].Name, fmt.Errorf("%w: host busy", hypervisor.ErrTransient), -1)
	e.fake.FailVM(vms[2].Name, fmt.Errorf("permission denied"), -1)
	res := e.run(testPolicy("retry"))
	byName := map[string]catalog.Task{}
	for _, tk := range res.Tasks {
		byName[tk.VMName] = tk
	}
	if tk := byName[vms[0].Name]; tk.Status != catalog.StatusSuccess || tk.Attempts != 3 {
		t.Errorf("transient twice: %s after %d attempts (%s)", tk.Status, tk.Attempts, tk.Error)
	}
	if tk := byName[vms[1].Name]; tk.Status != catalog.StatusFailed || tk.Attempts != 3 || !strings.Contains(tk.Error, "host busy") {
		t.Errorf("always transient: %s after %d attempts (%s)", tk.Status, tk.Attempts, tk.Error)
	}
	if tk := byName[vms[2].Name]; tk.Status != catalog.StatusFailed || tk.Attempts != 1 {
		t.Errorf("permanent: %s after %d attempts", tk.Status, tk.Attempts)
	}
	if n := len(e.cat.EventsOf(res.Job.ID, "retry")); n != 4 {
		t.Errorf("%d retry events, want 4", n)
	}
	e.noLeaks()
}

func TestOperationTimeoutAbandonsHungCall(t *testing.T) {
	e := newEnv(t, fake.Options{Seed: 9, VMs: 3, DiskSize: 64 << 10}, nil, nil)
	vms, _ := e.fake.Inventory(context.Background())
	e.fake.HangVM(vms[0].Name, true) // ignores cancellation
	e.fake.HangVM(vms[1].Name, false)
	p := testPolicy("hang")
	p.Timeouts.SnapshotCreate = 30 * time.Millisecond
	p.Retries.Attempts = 1
	res := e.run(p)
	if res.Job.Status != catalog.StatusPartial || res.Job.TasksFail != 2 {
		t.Fatalf("job %s: %s", res.Job.Status, res.Job.Error)
	}
	for _, tk := range res.Failed() {
		if !strings.Contains(tk.Error, "timed out") {
			t.Errorf("%s: %s", tk.VMName, tk.Error)
		}
	}
	// The hung call returns a session later; the engine must close it.
	e.fake.Unhang()
	if err := e.eng.Close(); err != nil {
		t.Fatal(err)
	}
	e.noLeaks()
}

func TestPerVMTimeout(t *testing.T) {
	slow := fake.Latency{Min: time.Hour, Max: time.Hour}
	e := newEnv(t, fake.Options{Seed: 10, VMs: 2, SnapshotCreate: slow}, nil, nil)
	p := testPolicy("vm-timeout")
	p.Timeouts.VM = 20 * time.Millisecond
	res := e.run(p)
	if res.Job.Status != catalog.StatusFailed {
		t.Fatalf("job %s", res.Job.Status)
	}
	for _, tk := range res.Tasks {
		if !strings.Contains(tk.Error, "VM timeout exceeded") || tk.Attempts != 1 {
			t.Errorf("%s: %d attempts: %s", tk.VMName, tk.Attempts, tk.Error)
		}
	}
	e.noLeaks()
}

// blockingReads makes every disk read wait until its context ends, after
// announcing itself, so a test can cancel a job while sessions are open.
type blockingReads struct {
	hypervisor.Connector
	reading chan string
}

func (b *blockingReads) Snapshot(ctx context.Context, vm hypervisor.VMRef, req hypervisor.SnapshotRequest) (hypervisor.Session, error) {
	s, err := b.Connector.Snapshot(ctx, vm, req)
	if err != nil {
		return nil, err
	}
	return &blockingSession{Session: s, b: b, vm: vm.Name}, nil
}

type blockingSession struct {
	hypervisor.Session
	b    *blockingReads
	vm   string
	once sync.Once
}

func (s *blockingSession) OpenDisk(ctx context.Context, key string) (hypervisor.DiskReader, error) {
	r, err := s.Session.OpenDisk(ctx, key)
	if err != nil {
		return nil, err
	}
	return &blockingReader{DiskReader: r, s: s, ctx: ctx}, nil
}

type blockingReader struct {
	hypervisor.DiskReader
	s   *blockingSession
	ctx context.Context
}

func (r *blockingReader) ReadAt(p []byte, off int64) (int, error) {
	r.s.once.Do(func() { r.s.b.reading <- r.s.vm })
	<-r.ctx.Done()
	return 0, r.ctx.Err()
}

func TestCancellationReleasesEverySession(t *testing.T) {
	var br *blockingReads
	e := newEnv(t, fake.Options{Seed: 11, VMs: 12, DiskSize: 128 << 10, Allocated: 1}, &policy.Config{Limits: policy.Limits{Tasks: 4}},
		func(o *Options) {
			br = &blockingReads{Connector: o.Connectors["lab"], reading: make(chan string, 16)}
			o.Connectors = map[string]hypervisor.Connector{"lab": br}
		})
	ctx, cancel := context.WithCancel(context.Background())
	job, err := e.eng.Start(ctx, testPolicy("cancel"))
	if err != nil {
		t.Fatal(err)
	}
	for range 4 { // four VMs hold snapshots and are reading
		<-br.reading
	}
	if n := e.fake.Counters().OpenSessions; n != 4 {
		t.Fatalf("%d sessions open before cancelling, want 4", n)
	}
	cancel()
	res, err := job.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Job.Status != catalog.StatusCancelled {
		t.Fatalf("job %s", res.Job.Status)
	}
	var cancelled int
	for _, tk := range res.Tasks {
		if tk.Status == catalog.StatusCancelled {
			cancelled++
		}
	}
	if cancelled != 12 {
		t.Fatalf("%d of 12 tasks cancelled", cancelled)
	}
	e.noLeaks()
	if n := e.fake.Counters(); n.ClosedFail != 4 || n.ClosedOK != 0 {
		t.Fatalf("sessions closed %+v; want 4 closed as failed", n)
	}
}

// Without a task manager a job still records this process as its owner,
// writes its progress and heartbeats, and stops when another process
// requests a cancel in the catalog.
func TestCancelRequestedInTheCatalogStopsTheJob(t *testing.T) {
	var br *blockingReads
	e := newEnv(t, fake.Options{Seed: 12, VMs: 3, DiskSize: 128 << 10, Allocated: 1}, nil, func(o *Options) {
		br = &blockingReads{Connector: o.Connectors["lab"], reading: make(chan string, 16)}
		o.Connectors = map[string]hypervisor.Connector{"lab": br}
	})
	ctx := context.Background()
	job, err := e.eng.Start(ctx, testPolicy("remote-cancel"))
	if err != nil {
		t.Fatal(err)
	}
	<-br.reading
	rec, err := e.cat.GetJob(ctx, job.ID())
	if err != nil {
		t.Fatal(err)
	}
	if rec.Owner.PID != os.Getpid() || rec.Owner.Host == "" || rec.Heartbeat.IsZero() || rec.Object != "/policies/remote-cancel" {
		t.Fatalf("running job: %+v", rec)
	}
	if _, err := e.cat.RequestCancel(ctx, job.ID(), "cancel requested by another process"); err != nil {
		t.Fatal(err)
	}
	res, err := job.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Job.Status != catalog.StatusCancelled || res.Job.Progress.ItemsTotal != 3 || res.Job.Progress.ItemsDone != 3 {
		t.Fatalf("job after the cancel request: %+v", res.Job)
	}
	e.noLeaks()
}
