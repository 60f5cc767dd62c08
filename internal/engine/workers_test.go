package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/hypervisor/fake"
	"github.com/coffer-backup/coffer/internal/policy"
	"github.com/coffer-backup/coffer/internal/repo"
)

// attemptRun is one attempt as the runner saw it: where, what, when.
type attemptRun struct {
	worker, vm string
	start, end time.Time
}

// recordingRunner runs attempts in this process and records each one's
// placement and span; hold, when set, decides instead how an attempt
// runs (a worker that hangs).
type recordingRunner struct {
	mu   sync.Mutex
	runs []attemptRun
	done chan string // each attempt's VM as it ends
	hold func(ctx context.Context, p Placement) (bool, error)
}

func newRecordingRunner() *recordingRunner { return &recordingRunner{done: make(chan string, 1024)} }

func (r *recordingRunner) RunAttempt(ctx context.Context, p Placement, local func(context.Context) (*repo.Point, error)) (*repo.Point, error) {
	start := time.Now()
	var snap *repo.Point
	var err error
	held := false
	if r.hold != nil {
		held, err = r.hold(ctx, p)
	}
	if !held {
		snap, err = local(ctx)
	}
	r.mu.Lock()
	r.runs = append(r.runs, attemptRun{p.Worker, p.VM, start, time.Now()})
	r.mu.Unlock()
	r.done <- p.VM
	return snap, err
}

func (r *recordingRunner) attempts() []attemptRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]attemptRun(nil), r.runs...)
}

// peaks sweeps the recorded spans: the most attempts at once per pool
// ("global", "worker:NAME", "host:HOST"). The dispatcher holds a unit's
// slots over a superset of its runner's span, so a peak above a limit is
// an over-grant.
func peaks(runs []attemptRun, hostOf map[string]string) map[string]int {
	type edge struct {
		at    time.Time
		delta int
		keys  []string
	}
	var edges []edge
	for _, r := range runs {
		keys := []string{GlobalPool, workerKey(r.worker), "host:" + hostOf[r.vm]}
		edges = append(edges, edge{r.start, 1, keys}, edge{r.end, -1, keys})
	}
	// Ends before starts at one instant: [start, end) spans.
	sort.Slice(edges, func(i, j int) bool {
		if !edges[i].at.Equal(edges[j].at) {
			return edges[i].at.Before(edges[j].at)
		}
		return edges[i].delta < edges[j].delta
	})
	cur, peak := map[string]int{}, map[string]int{}
	for _, e := range edges {
		for _, k := range e.keys {
			cur[k] += e.delta
			peak[k] = max(peak[k], cur[k])
		}
	}
	return peak
}

// fleetEnv is an engine over one fake connection "lab" of the given kind
// (as the configuration says: the routing reads it there) and a runner
// that records placements.
func fleetEnv(t *testing.T, kind string, fo fake.Options, limits policy.Limits) (*env, *recordingRunner, map[string]string) {
	t.Helper()
	rr := newRecordingRunner()
	e := newEnv(t, fo, &policy.Config{Limits: limits}, func(o *Options) {
		o.Config.Connections[len(o.Config.Connections)-1].Kind = kind
		o.UnitRunner = rr
	})
	vms, _ := e.fake.Inventory(context.Background())
	hostOf := map[string]string{}
	for _, vm := range vms {
		hostOf[vm.Name] = vm.Host
	}
	return e, rr, hostOf
}

func hostWorkers(slots int, hosts ...string) []Worker {
	var ws []Worker
	for i, h := range hosts {
		ws = append(ws, Worker{Name: fmt.Sprintf("w%d", i+1), Slots: slots, Reach: Reach{Connections: []string{"lab"}, Hosts: []string{"lab/" + h}}})
	}
	return ws
}

func checkPeaks(t *testing.T, runs []attemptRun, hostOf map[string]string, ws []Worker, tasks, perHost int) {
	t.Helper()
	p := peaks(runs, hostOf)
	if p[GlobalPool] > tasks {
		t.Errorf("global peak %d > %d", p[GlobalPool], tasks)
	}
	for _, w := range ws {
		if n := p[workerKey(w.Name)]; n > w.Slots {
			t.Errorf("worker %s peak %d > its %d slots", w.Name, n, w.Slots)
		}
	}
	for k, n := range p {
		if strings.HasPrefix(k, "host:") && perHost > 0 && n > perHost {
			t.Errorf("%s peak %d > %d", k, n, perHost)
		}
	}
	if p[GlobalPool] < 2 {
		t.Fatalf("no concurrency at all (peak %d): the test proves nothing", p[GlobalPool])
	}
}

// QEMU units run only on the worker of their host, whatever its load.
func TestWorkersHostAffinity(t *testing.T) {
	lat := fake.Latency{Min: 200 * time.Microsecond, Max: 3 * time.Millisecond}
	e, rr, hostOf := fleetEnv(t, "qemu", fake.Options{Seed: 31, VMs: 45, Hosts: 3, Datastores: 6, DiskSize: 128 << 10,
		SnapshotCreate: lat, SnapshotRemove: lat}, policy.Limits{Tasks: 9, PerHost: 4})
	ws := hostWorkers(2, "host-01", "host-02", "host-03")
	if err := e.eng.SetWorkers(ws); err != nil {
		t.Fatal(err)
	}
	res := e.run(testPolicy("affine"))
	if res.Job.Status != catalog.StatusSuccess || len(res.Tasks) != 45 {
		t.Fatalf("job %s (%s), %d tasks", res.Job.Status, res.Job.Error, len(res.Tasks))
	}
	runs := rr.attempts()
	want := map[string]string{"host-01": "w1", "host-02": "w2", "host-03": "w3"}
	for _, r := range runs {
		if r.worker != want[hostOf[r.vm]] {
			t.Errorf("%s of %s ran on worker %q", r.vm, hostOf[r.vm], r.worker)
		}
	}
	checkPeaks(t, runs, hostOf, ws, 9, 4)
	e.noLeaks()
}

// Units any worker may run (vSphere) spread over workers of equal slots
// within 1.5x, and no pool is ever over its limit.
func TestWorkersSpreadAndPeaks(t *testing.T) {
	lat := fake.Latency{Min: 200 * time.Microsecond, Max: 3 * time.Millisecond}
	e, rr, hostOf := fleetEnv(t, "vsphere", fake.Options{Seed: 32, VMs: 90, Hosts: 3, Datastores: 6, DiskSize: 128 << 10,
		SnapshotCreate: lat, SnapshotRemove: lat}, policy.Limits{Tasks: 5, PerHost: 3})
	// The workers have more slots than limits.tasks lets run: which one
	// takes a unit is the dispatcher's choice, not whichever freed a slot.
	var ws []Worker
	for i := 1; i <= 3; i++ {
		ws = append(ws, Worker{Name: fmt.Sprintf("w%d", i), Slots: 3, Reach: Reach{Connections: []string{"lab"}}})
	}
	if err := e.eng.SetWorkers(ws); err != nil {
		t.Fatal(err)
	}
	res := e.run(testPolicy("spread"))
	if res.Job.Status != catalog.StatusSuccess {
		t.Fatalf("job %s (%s)", res.Job.Status, res.Job.Error)
	}
	runs := rr.attempts()
	per := map[string]int{}
	for _, r := range runs {
		per[r.worker]++
	}
	lo, hi := len(runs), 0
	for _, w := range ws {
		lo, hi = min(lo, per[w.Name]), max(hi, per[w.Name])
	}
	t.Logf("attempts per worker: %v", per)
	if len(per) != 3 || float64(hi) > 1.5*float64(lo) {
		t.Fatalf("attempts per worker %v: not within 1.5x", per)
	}
	checkPeaks(t, runs, hostOf, ws, 5, 3)
	if p := e.fake.Peaks(); p.MaxHost() > 3 {
		t.Fatalf("host peak %d at the hypervisor", p.MaxHost())
	}
	e.noLeaks()
}

// A unit no live worker can run waits and says why; it runs once a worker
// that reaches it joins.
func TestWorkersUnreachedWaitsUntilOneJoins(t *testing.T) {
	e, rr, hostOf := fleetEnv(t, "qemu", fake.Options{Seed: 33, VMs: 12, Hosts: 3, DiskSize: 64 << 10}, policy.Limits{Tasks: 4})
	ws := hostWorkers(2, "host-01", "host-02")
	if err := e.eng.SetWorkers(ws); err != nil {
		t.Fatal(err)
	}
	var reachable, stranded int
	for _, h := range hostOf {
		if h == "host-03" {
			stranded++
		} else {
			reachable++
		}
	}
	if stranded == 0 || reachable == 0 {
		t.Fatalf("the fleet's layout proves nothing: %v", hostOf)
	}
	job, err := e.eng.Start(context.Background(), testPolicy("stranded"))
	if err != nil {
		t.Fatal(err)
	}
	for range reachable {
		<-rr.done
	}
	// Everything reachable is done and the pump ran after it: what is
	// queued waits for a worker, and says which.
	e.eng.disp.mu.Lock()
	var why []string
	for _, u := range e.eng.disp.queue {
		why = append(why, u.waiting)
	}
	e.eng.disp.mu.Unlock()
	if len(why) != stranded {
		t.Fatalf("%d units queued, want %d", len(why), stranded)
	}
	for _, w := range why {
		if w != "no worker reaches host host-03" {
			t.Fatalf("waiting because %q", w)
		}
	}
	ws = append(ws, hostWorkers(1, "host-01", "host-02", "host-03")[2])
	if err := e.eng.SetWorkers(ws); err != nil {
		t.Fatal(err)
	}
	res, err := job.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Job.Status != catalog.StatusSuccess {
		t.Fatalf("job %s (%s)", res.Job.Status, res.Job.Error)
	}
	evs := e.cat.EventsOf(res.Job.ID, "no-worker")
	if len(evs) != stranded || !strings.Contains(evs[0].Message, "waits: no worker reaches host host-03") {
		t.Fatalf("%d no-worker events, want %d: %+v", len(evs), stranded, evs)
	}
	for _, r := range rr.attempts() {
		if hostOf[r.vm] == "host-03" && r.worker != "w3" {
			t.Errorf("%s ran on %q", r.vm, r.worker)
		}
	}
	e.noLeaks()
}

// A lost worker's running attempts are cancelled, counted as transient
// failures and retried on the workers left; the job succeeds and the
// lost worker's pool goes.
func TestWorkerLostReadmitsItsUnits(t *testing.T) {
	e, rr, hostOf := fleetEnv(t, "vsphere", fake.Options{Seed: 34, VMs: 12, Hosts: 2, DiskSize: 64 << 10}, policy.Limits{Tasks: 4})
	hung := make(chan string, 16)
	rr.hold = func(ctx context.Context, p Placement) (bool, error) {
		if p.Worker != "w1" {
			return false, nil
		}
		hung <- p.VM // w1 stops answering mid-attempt
		<-ctx.Done()
		return true, context.Cause(ctx)
	}
	ws := []Worker{{Name: "w1", Slots: 2, Reach: Reach{Connections: []string{"lab"}}}, {Name: "w2", Slots: 2, Reach: Reach{Connections: []string{"lab"}}}}
	if err := e.eng.SetWorkers(ws); err != nil {
		t.Fatal(err)
	}
	job, err := e.eng.Start(context.Background(), testPolicy("lost"))
	if err != nil {
		t.Fatal(err)
	}
	lost := map[string]bool{<-hung: true, <-hung: true}
	if n := e.eng.WorkerLost("w1"); n != 2 {
		t.Fatalf("%d attempts cancelled, want 2", n)
	}
	res, err := job.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Job.Status != catalog.StatusSuccess || res.Job.TasksOK != 12 {
		t.Fatalf("job %s (%s)", res.Job.Status, res.Job.Error)
	}
	for _, tk := range res.Tasks {
		if want := map[bool]int{true: 2, false: 1}[lost[tk.VMName]]; tk.Attempts != want {
			t.Errorf("%s: %d attempts, want %d", tk.VMName, tk.Attempts, want)
		}
	}
	if n := len(e.cat.EventsOf(res.Job.ID, "retry")); n != 2 {
		t.Errorf("%d retry events, want 2", n)
	}
	w1 := 0
	for _, r := range rr.attempts() {
		if r.worker == "w1" {
			w1++
		}
	}
	if w1 != 2 {
		t.Errorf("%d attempts on w1, want the 2 lost", w1)
	}
	checkPeaks(t, rr.attempts(), hostOf, ws, 4, 0)
	if got := e.eng.Workers(); len(got) != 1 || got[0].Name != "w2" || got[0].InUse != 0 {
		t.Fatalf("workers after the loss: %+v", got)
	}
	for _, s := range e.eng.Slots() {
		if s.Key == "worker:w1" {
			t.Fatalf("the lost worker's pool is still there: %+v", s)
		}
	}
	e.noLeaks()
}

// An engine never given workers places nothing and runs as before.
func TestNoWorkersRunsInProcess(t *testing.T) {
	e, rr, _ := fleetEnv(t, "qemu", fake.Options{Seed: 35, VMs: 6, DiskSize: 64 << 10}, policy.Limits{})
	res := e.run(testPolicy("local"))
	if res.Job.Status != catalog.StatusSuccess {
		t.Fatalf("job %s (%s)", res.Job.Status, res.Job.Error)
	}
	for _, r := range rr.attempts() {
		if r.worker != "" {
			t.Fatalf("%s placed on %q without workers", r.vm, r.worker)
		}
	}
	if e.eng.Workers() != nil || len(e.cat.EventsOf(res.Job.ID, "no-worker")) != 0 {
		t.Fatal("workers or waits without workers")
	}
}

// A drained worker (left out of the set) takes no new unit; its running
// ones finish there, and its pool goes with the last of them.
func TestDrainedWorkerFinishesItsUnits(t *testing.T) {
	e, rr, _ := fleetEnv(t, "vsphere", fake.Options{Seed: 36, VMs: 10, Hosts: 2, DiskSize: 64 << 10}, policy.Limits{Tasks: 4})
	started, release := make(chan string, 16), make(chan struct{})
	rr.hold = func(ctx context.Context, p Placement) (bool, error) {
		if p.Worker == "w1" {
			started <- p.VM
			<-release // then runs the attempt as usual
		}
		return false, nil
	}
	reach := Reach{Connections: []string{"lab"}}
	if err := e.eng.SetWorkers([]Worker{{Name: "w1", Slots: 2, Reach: reach}, {Name: "w2", Slots: 2, Reach: reach}}); err != nil {
		t.Fatal(err)
	}
	job, err := e.eng.Start(context.Background(), testPolicy("drain"))
	if err != nil {
		t.Fatal(err)
	}
	<-started
	<-started
	if err := e.eng.SetWorkers([]Worker{{Name: "w2", Slots: 2, Reach: reach}}); err != nil {
		t.Fatal(err)
	}
	if got := e.eng.Workers(); len(got) != 2 || !got[0].Gone || got[0].InUse != 2 {
		t.Fatalf("while draining: %+v", got)
	}
	close(release)
	res, err := job.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.Job.Status != catalog.StatusSuccess {
		t.Fatalf("job %s (%s)", res.Job.Status, res.Job.Error)
	}
	per := map[string]int{}
	for _, r := range rr.attempts() {
		per[r.worker]++
	}
	if per["w1"] != 2 || per["w2"] != 8 {
		t.Fatalf("attempts per worker %v: the drained worker took new units or lost its own", per)
	}
	if got := e.eng.Workers(); len(got) != 1 || got[0].Name != "w2" {
		t.Fatalf("after the drain: %+v", got)
	}
	e.noLeaks()
}
