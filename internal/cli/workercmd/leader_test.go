package workercmd_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/cli/clitest"
	"github.com/coffer-backup/coffer/internal/testutil"
)

// leaderConfig is the fleet of units_test.go (one connection per worker)
// under a policy scheduled every 2 s whose snapshots take 6 s: each
// worker has 3 VMs for 2 slots, so a run always has units running and
// units waiting, and the units running when the leader dies outlast the
// takeover (the schedules lease lasts 3 s).
const leaderConfig = `
maintenance: {worker-dead-after: 2s, takeover-after: 3s}
connections:
  - {name: east, kind: fake, options: {seed: 1, vms: 3, hosts: 1, datastores: 1, disk-size: 256KiB, snapshot-create: 6s}}
  - {name: west, kind: fake, options: {seed: 2, vms: 3, hosts: 1, datastores: 1, disk-size: 256KiB, snapshot-create: 6s}}
policies:
  - {name: fleet, connections: [east, west], schedule: "@every 2s", retries: {attempts: 5, backoff: 100ms, max-backoff: 100ms}}
`

const workerSlots = 2

// leaderFleet is two servers on one PostgreSQL catalog, the first leading,
// and two workers.
type leaderFleet struct {
	e        *clitest.Env
	cat      catalog.Catalog
	dsn      string
	a, b     *clitest.ServerProc
	workers  []*clitest.ServerProc
	epochOfA int64
}

func startLeaderFleet(t *testing.T) *leaderFleet {
	return startLeaderFleetWith(t, leaderConfig, func(e *clitest.Env, name, connection string) *clitest.ServerProc {
		return startUnitWorker(e, name, connection)
	})
}

// startLeaderFleetWith is startLeaderFleet with another configuration,
// and its workers started by start.
func startLeaderFleetWith(t *testing.T, config string, start func(e *clitest.Env, name, connection string) *clitest.ServerProc) *leaderFleet {
	return startLeaderFleetOn(t, config, start, nil)
}

// startLeaderFleetOn is startLeaderFleetWith, with prepare (if set)
// called on the environment before any process starts.
func startLeaderFleetOn(t *testing.T, config string, start func(e *clitest.Env, name, connection string) *clitest.ServerProc,
	prepare func(e *clitest.Env)) *leaderFleet {
	dsn := testutil.StartPostgres(t)
	e := pgEnv(t, dsn)
	e.Config(config)
	if prepare != nil {
		prepare(e)
	}
	f := &leaderFleet{e: e, dsn: dsn, cat: openCatalog(t, e)}
	e.Vars["COFFER_STATE_DIR"] = filepath.Join(e.Dir, "state-a")
	f.a = e.StartServer()
	waitLog(t, f.a, "server a leads", "this server runs the schedules")
	e.Vars["COFFER_STATE_DIR"] = filepath.Join(e.Dir, "state-b")
	f.b = e.StartServer()
	f.workers = []*clitest.ServerProc{start(e, "kvm1", "east"), start(e, "kvm2", "west")}
	waitLog(t, f.a, "a's engine given both workers", "workers=kvm1,kvm2")
	l, err := f.cat.GetLease(context.Background(), "schedules")
	if err != nil {
		t.Fatal(err)
	}
	f.epochOfA = l.Epoch
	return f
}

// TestLeaderKilledDuringDispatch: the leading server is killed with
// SIGKILL while its units run on the workers. The other server takes the
// schedules over, holds the dead leader's units until they end, and
// admits again: no worker ever has more grants outstanding than its slots,
// no VM is granted or backed up twice at once, the dead leader's run is
// recorded as interrupted, and the next run backs every VM up.
func TestLeaderKilledDuringDispatch(t *testing.T) {
	f := startLeaderFleet(t)
	running := waitEvent(t, f.cat, time.Now(), "kvm1")
	if err := f.a.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	_ = awaitExit(t, f.a)
	tk := f.takeover(t, killed)
	t.Logf("leader killed: %s", tk.String(killed))
	f.everyVMBackedUpAfter(t, tk.leads)
	dead, err := f.cat.GetJob(context.Background(), running.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if dead.Status != catalog.StatusFailed || !strings.Contains(dead.Error, "interrupted") {
		t.Errorf("the dead leader's run: %s (%s), want failed: interrupted", dead.Status, dead.Error)
	}
	_, _ = f.sweep(t, nil)
}

// frozenFor is how long TestLeaderFrozenDuringDispatch keeps the leader
// frozen: issue 36's 45 s, fifteen times the takeover time.
const frozenFor = 45 * time.Second

// TestLeaderFrozenDuringDispatch: the leading server is frozen (SIGSTOP)
// for 45 s, far longer than the takeover time, then woken. The other
// server takes over and admits, and a whole run of the policy succeeds
// while the old leader is still frozen (were it frozen inside a
// transaction, PostgreSQL ends that transaction and frees its locks:
// postgres.PoolConfig); the woken server notices it lost the lease and stops
// dispatching, and whatever it granted late, under its old epoch of the
// lease, is refused by the workers without running.
func TestLeaderFrozenDuringDispatch(t *testing.T) {
	f := startLeaderFleet(t)
	waitEvent(t, f.cat, time.Now(), "kvm1")
	if err := f.a.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	t.Cleanup(func() { _ = f.a.Cmd.Process.Signal(syscall.SIGCONT) })
	tk := f.takeover(t, frozen)
	f.everyVMBackedUpAfter(t, tk.leads)
	// The freeze lasts the 45 s whatever the takeover took: a
	// length of the scenario, not a wait for something to happen.
	time.Sleep(time.Until(frozen.Add(frozenFor)))
	if err := f.a.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	woke := time.Now()
	waitLog(t, f.a, "the woken server steps down", "another server took the schedules over")
	t.Logf("leader frozen %s: %s", woke.Sub(frozen).Round(time.Millisecond), tk.String(frozen))
	f.everyVMBackedUpAfter(t, woke)
	late, fenced := f.sweep(t, &tk)
	logged := 0
	for _, w := range f.workers {
		logged += strings.Count(w.Log(), "fenced VM unit of a stale leader")
	}
	if logged != fenced {
		t.Errorf("the workers logged %d stale leader's units fenced, the queue holds %d granted late and fenced", logged, fenced)
	}
	t.Logf("the woken leader granted %d units late: %d fenced by the workers, %d cancelled by its step-down before a worker took them",
		late, fenced, late-fenced)
	if t.Failed() {
		t.Logf("a:\n%s\nb:\n%s\nkvm1:\n%s\nkvm2:\n%s", f.a.Log(), f.b.Log(), f.workers[0].Log(), f.workers[1].Log())
	}
}

// takeoverAt is when server b took the schedules over.
type takeoverAt struct {
	lease      time.Time // b's log: it holds the schedules lease
	leads      time.Time // b's log: admission resumes (the grants before it held)
	firstGrant time.Time // b's first unit handed off
	// firstFreed is the first end of a held unit (zero: none was held):
	// until then b's units wait for the slots, unless some were free.
	firstFreed time.Time
	held       int   // units granted before, held
	epoch      int64 // b's epoch of the lease
}

var (
	resumesRE = regexp.MustCompile(`time=(\S+) level=INFO msg="admission resumes after the takeover" leader_epoch=(\d+) units_held=(\d+)`)
	leaseRE   = regexp.MustCompile(`time=(\S+) level=INFO msg="this server runs the schedules"`)
)

// String is the takeover's timings from since (the kill or the freeze).
func (tk takeoverAt) String(since time.Time) string {
	s := fmt.Sprintf("lease taken %s after, admission resumed %s after the lease with %d units held, first grant %s after the lease",
		tk.lease.Sub(since).Round(time.Millisecond), tk.leads.Sub(tk.lease).Round(time.Millisecond), tk.held,
		tk.firstGrant.Sub(tk.lease).Round(time.Millisecond))
	if !tk.firstFreed.IsZero() {
		s += fmt.Sprintf(" (%s after the first held unit ended)", tk.firstGrant.Sub(tk.firstFreed).Round(time.Millisecond))
	}
	return s
}

// takeover waits for b to take the schedules over and hand a unit off.
func (f *leaderFleet) takeover(t *testing.T, since time.Time) takeoverAt {
	t.Helper()
	waitLog(t, f.b, "server b takes over", "admission resumes after the takeover")
	m := resumesRE.FindStringSubmatch(f.b.Log())
	if m == nil {
		t.Fatalf("b's takeover is not logged as expected:\n%s", f.b.Log())
	}
	var tk takeoverAt
	tk.leads = logTime(t, m[1])
	tk.epoch, _ = strconv.ParseInt(m[2], 10, 64)
	tk.held, _ = strconv.Atoi(m[3])
	if l := leaseRE.FindStringSubmatch(f.b.Log()); l != nil {
		tk.lease = logTime(t, l[1])
	}
	if tk.epoch <= f.epochOfA || tk.leads.Before(since) {
		t.Fatalf("b leads at epoch %d (a's was %d) at %s", tk.epoch, f.epochOfA, tk.leads)
	}
	deadline := time.Now().Add(patience)
	for {
		for _, g := range f.grants(t) {
			if g.unit.LeaderEpoch == tk.epoch && (tk.firstGrant.IsZero() || g.created.Before(tk.firstGrant)) {
				tk.firstGrant = g.created
			}
			held := g.unit.LeaderEpoch < tk.epoch && g.created.Before(tk.leads) && g.ran && !g.fenced && g.ended.After(tk.leads)
			if held && (tk.firstFreed.IsZero() || g.ended.Before(tk.firstFreed)) {
				tk.firstFreed = g.ended
			}
		}
		if !tk.firstGrant.IsZero() {
			return tk
		}
		if time.Now().After(deadline) {
			t.Fatalf("b handed no unit off within %s of its takeover:\n%s", patience, f.diagnosis(t))
		}
		time.Sleep(50 * time.Millisecond) // a poll's pace, not a synchronisation
	}
}

// diagnosis is every process's log and PostgreSQL's sessions that hold a
// transaction open or wait for a lock, for a failure's message.
func (f *leaderFleet) diagnosis(t *testing.T) string {
	var b strings.Builder
	// b's and the workers' goroutines say where a hang is; a, which a
	// test may have frozen, only logs.
	fmt.Fprintf(&b, "a:\n%s\nb:\n%s\n", f.a.Log(), f.b.Goroutines())
	for i, w := range f.workers {
		fmt.Fprintf(&b, "worker %d:\n%s\n", i+1, w.Goroutines())
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		return b.String() + err.Error()
	}
	defer func() { _ = conn.Close(ctx) }()
	rows, err := conn.Query(ctx, `SELECT pid, state, COALESCE(wait_event_type, ''), COALESCE(wait_event, ''),
		pg_blocking_pids(pid)::text, left(query, 300) FROM pg_stat_activity
		WHERE state = 'idle in transaction' OR wait_event_type = 'Lock'`)
	if err != nil {
		return b.String() + err.Error()
	}
	defer rows.Close()
	b.WriteString("PostgreSQL sessions in a transaction or waiting for a lock:\n")
	for rows.Next() {
		var pid int
		var state, waitType, wait, blockers, query string
		if err := rows.Scan(&pid, &state, &waitType, &wait, &blockers, &query); err != nil {
			return b.String() + err.Error()
		}
		fmt.Fprintf(&b, "  pid %d %s %s/%s blocked by %s: %s\n", pid, state, waitType, wait, blockers, query)
	}
	return b.String()
}

// everyVMBackedUpAfter waits for a run of the policy started after since
// to succeed with a point for each of the six VMs. A run that resumes
// the dead leader's (the VMs it had not backed up) is not one.
func (f *leaderFleet) everyVMBackedUpAfter(t *testing.T, since time.Time) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(2 * patience)
	for {
		jobs, err := f.cat.ListJobs(ctx, catalog.JobFilter{Kind: catalog.KindBackupPolicy, Since: since})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			if j.Status != catalog.StatusSuccess || j.CreatedAt.Before(since) || f.resumes(t, j.ID) {
				continue
			}
			tasks, err := f.cat.ListTasks(ctx, catalog.TaskFilter{JobID: j.ID})
			if err != nil {
				t.Fatal(err)
			}
			vms := map[string]bool{}
			for _, task := range tasks {
				if task.Status == catalog.StatusSuccess && task.BackupPointID != "" {
					vms[task.Connection+"/"+task.VMID] = true
				}
			}
			if len(vms) == 6 {
				return
			}
			t.Fatalf("job %d succeeded with points for %d VMs of 6: %+v", j.ID, len(vms), tasks)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run after %s succeeded within %s:\n%s", since.Format(time.TimeOnly), 2*patience, f.diagnosis(t))
		}
		time.Sleep(100 * time.Millisecond) // a poll's pace, not a synchronisation
	}
}

// resumes says whether job id resumes an interrupted run (its log says so).
func (f *leaderFleet) resumes(t *testing.T, id int64) bool {
	t.Helper()
	evs, err := f.cat.ListEvents(context.Background(), catalog.EventFilter{JobID: id})
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(evs, func(ev catalog.Event) bool { return ev.Kind == "resumes" })
}

// grant is a VM unit's River job: when the leader handed it off and when
// it ended, and whether the worker refused it as fenced.
type grant struct {
	id             int64
	unit           unitArgs
	created, ended time.Time
	finished       bool
	// fenced: the worker refused it; ran: a worker started it (River's
	// attempted_at), so a unit cancelled before it ran has neither.
	fenced, ran bool
}

type unitArgs struct {
	Connection  string `json:"connection"`
	VMID        string `json:"vm_id"`
	Worker      string `json:"worker"`
	LeaderEpoch int64  `json:"leader_epoch"`
	Job         int64  `json:"job"`
	Task        int64  `json:"task"`
	Attempt     int    `json:"attempt"`
}

// grants reads the VM units' jobs from River's table (read only: the
// queue is internal/fleet's).
func (f *leaderFleet) grants(t *testing.T) []grant {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, f.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close(ctx) }()
	rows, err := conn.Query(ctx, `SELECT id, args, created_at, finalized_at, attempted_at IS NOT NULL,
		COALESCE(metadata->'output', 'null') FROM river.river_job
		WHERE kind = 'coffer_vm_unit' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var out []grant
	for rows.Next() {
		var g grant
		var args, output []byte
		var ended *time.Time
		if err := rows.Scan(&g.id, &args, &g.created, &ended, &g.ran, &output); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(args, &g.unit); err != nil {
			t.Fatal(err)
		}
		var o struct {
			Fenced bool `json:"fenced"`
		}
		_ = json.Unmarshal(output, &o)
		g.fenced = o.Fenced
		if ended != nil {
			g.ended, g.finished = *ended, true
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// span is an interval during which something held a worker's slot and a
// VM.
type span struct {
	worker, vm string
	start, end time.Time
	what       string
}

// sweep checks, over the leaders' grants (River's rows: from the hand-off
// to the worker's completion) and the workers' logs (from a unit's start
// to its end), that at no instant a worker has more than its slots or a
// VM more than one: zero double grants across the takeover. Grants the
// workers refused as fenced ran nothing and are left out of the grants'
// sweep, as are those cancelled before they ran; with tk (a frozen
// leader), the fenced must be exactly the old leader's grants made after
// the takeover that reached a worker. It returns the old leader's late
// grants, and how many of them the workers fenced (the others its own
// step-down cancelled before a worker took them).
func (f *leaderFleet) sweep(t *testing.T, tk *takeoverAt) (late, fenced int) {
	t.Helper()
	var grants []span
	epochs := map[int64]int{}
	end := time.Now()
	for _, g := range f.grants(t) {
		epochs[g.unit.LeaderEpoch]++
		staleAfterTakeover := tk != nil && g.unit.LeaderEpoch < tk.epoch && g.created.After(tk.leads)
		if staleAfterTakeover {
			late++
			if g.fenced {
				fenced++
			}
			// Refused by the worker, or cancelled by the woken leader
			// before any worker took it.
			if !g.finished || !(g.fenced || !g.ran) {
				t.Errorf("grant %d of the stale leader (epoch %d) made at %s after the takeover at %s was not refused: fenced %v, finished %v (%+v)",
					g.id, g.unit.LeaderEpoch, g.created.Format(time.RFC3339Nano), tk.leads.Format(time.RFC3339Nano), g.fenced, g.finished, g.unit)
			}
		}
		// A grant made before the takeover that a worker took only after
		// it (a loaded worker's fetch) is refused too, rightly.
		takenLate := tk != nil && g.unit.LeaderEpoch < tk.epoch && !tk.lease.IsZero() && g.ended.After(tk.lease)
		if g.fenced || !g.ran {
			if g.fenced && !staleAfterTakeover && !takenLate {
				t.Errorf("grant %d (epoch %d, at %s) was fenced, but not a stale leader's late grant", g.id, g.unit.LeaderEpoch, g.created)
			}
			continue
		}
		e := g.ended
		if !g.finished {
			e = end
		}
		grants = append(grants, span{g.unit.Worker, g.unit.Connection + "/" + g.unit.VMID, g.created, e, fmt.Sprintf("grant %d", g.id)})
	}
	t.Logf("grants by epoch of the schedules lease: %v", epochs)
	// The fewest are a resumed run's: the dead leader's 4 units and the
	// new leader's 2 of the VMs queued (the units it held end with their
	// points, which its run takes).
	if len(epochs) < 2 || len(grants) < 6 {
		t.Fatalf("%d grants by epoch %v: the sweep needs both leaders' grants", len(grants), epochs)
	}
	checkGrantPeaks(t, "grants", grants)
	var runs []span
	for i, w := range f.workers {
		runs = append(runs, unitSpans(t, []string{"kvm1", "kvm2"}[i], w.Log(), end)...)
	}
	checkGrantPeaks(t, "the workers' logs", runs)
	return late, fenced
}

var unitLogRE = regexp.MustCompile(`time=(\S+) level=INFO msg="VM unit (starts|ends)" vm=(\S+) job=(\d+) task=(\d+) attempt=(\d+)`)

// unitSpans reads a worker's units from its log.
func unitSpans(t *testing.T, worker, log string, end time.Time) []span {
	t.Helper()
	open := map[string]*span{}
	var out []span
	for _, m := range unitLogRE.FindAllStringSubmatch(log, -1) {
		key := strings.Join(m[3:], "/")
		at := logTime(t, m[1])
		if m[2] == "starts" {
			open[key] = &span{worker: worker, vm: m[3], start: at, what: worker + " unit " + key}
			continue
		}
		if s := open[key]; s != nil {
			s.end = at
			out = append(out, *s)
			delete(open, key)
		}
	}
	for _, s := range open {
		s.end = end
		out = append(out, *s)
	}
	return out
}

// checkGrantPeaks sweeps spans: the most at once per worker and per VM.
func checkGrantPeaks(t *testing.T, what string, spans []span) {
	t.Helper()
	type edge struct {
		at    time.Time
		delta int
		s     span
	}
	var edges []edge
	for _, s := range spans {
		edges = append(edges, edge{s.start, 1, s}, edge{s.end, -1, s})
	}
	sort.Slice(edges, func(i, j int) bool { // [start, end): ends first at one instant
		if !edges[i].at.Equal(edges[j].at) {
			return edges[i].at.Before(edges[j].at)
		}
		return edges[i].delta < edges[j].delta
	})
	perWorker, perVM, peak := map[string]int{}, map[string]int{}, map[string]int{}
	for _, e := range edges {
		perWorker[e.s.worker] += e.delta
		perVM[e.s.vm] += e.delta
		peak[e.s.worker] = max(peak[e.s.worker], perWorker[e.s.worker])
		if perWorker[e.s.worker] > workerSlots {
			t.Errorf("%s: worker %s has %d at once at %s (%s), more than its %d slots", what, e.s.worker, perWorker[e.s.worker],
				e.at.Format(time.RFC3339Nano), e.s.what, workerSlots)
		}
		if perVM[e.s.vm] > 1 {
			t.Errorf("%s: VM %s twice at once at %s (%s)", what, e.s.vm, e.at.Format(time.RFC3339Nano), e.s.what)
		}
	}
	workers := make([]string, 0, len(peak))
	for w := range peak {
		workers = append(workers, w)
	}
	slices.Sort(workers)
	for _, w := range workers {
		t.Logf("%s: worker %s peak %d of %d slots over %d spans", what, w, peak[w], workerSlots, len(spans))
	}
}

func logTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("a log line's time %q: %v", s, err)
	}
	return at
}
