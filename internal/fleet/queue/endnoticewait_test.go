package queue_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/fleet/queue"
)

// sleepUnit is a test-sleep of no time on worker, tagged tag; a gated
// one ends when sleepGate lets it.
func sleepUnit(worker, tag string, gated bool) queue.Unit {
	in := &sleepInput{}
	in.Body.Tag, in.Body.Gated = tag, gated
	return queue.Unit{Worker: worker, Epoch: 1, Operation: "test-sleep", Input: in}
}

// submitSleep submits sleepUnit(worker, tag, gated) and returns once the
// worker started it (an in-process worker's test-sleep announces it).
func submitSleep(t *testing.T, srv *queue.Client, worker, tag string, gated bool) queue.Submitted {
	t.Helper()
	s, err := srv.Submit(context.Background(), sleepUnit(worker, tag, gated))
	if err != nil {
		t.Fatal(err)
	}
	if got := <-sleepStarted; got != tag {
		t.Fatalf("started %.20q, want %.20q", got, tag)
	}
	return s
}

// watchGate lets a job end (sends on open) once srv watches it: a gated
// job then ends after its waiter watches for its end, as a unit does
// that takes longer than its submitter takes to wait (a waiter that
// comes after the notice reads the row). It counts srv's reads of an
// ended job's row (endsRead).
type watchGate struct {
	want     atomic.Int64
	open     chan struct{}
	endsRead atomic.Int64
}

func newWatchGate(srv *queue.Client, open chan struct{}) *watchGate {
	g := &watchGate{open: open}
	queue.OnWatch(srv, func(id int64) {
		if id == g.want.Load() {
			select {
			case g.open <- struct{}{}:
			default:
			}
		}
	})
	queue.OnEndRead(srv, func(_ int64, ended bool) {
		if ended {
			g.endsRead.Add(1)
		}
	})
	return g
}

// wait is srv.WaitSubmitted(s), its job let end once watched; reads is
// how many times the job's row was read ended meanwhile.
func (g *watchGate) wait(t *testing.T, srv *queue.Client, s queue.Submitted) (o *queue.Outcome, reads int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	before := g.endsRead.Load()
	g.want.Store(s.ID)
	o, err := srv.WaitSubmitted(ctx, s)
	g.want.Store(0)
	select { // a second watch (WaitSubmitted's fallback to Wait) may have left it open
	case <-g.open:
	default:
	}
	if err != nil {
		t.Fatal(err)
	}
	return o, g.endsRead.Load() - before
}

// tagOf is the tag of a test-sleep's outcome.
func tagOf(t *testing.T, o *queue.Outcome) string {
	t.Helper()
	var d sleepDoc
	if err := json.Unmarshal(o.Document, &d); err != nil || o.Err() != nil || !d.Slept {
		t.Fatalf("a test-sleep's outcome: %+v, %v", o, err)
	}
	return d.Tag
}

// TestOutcomeComesWithItsEndNotice: a hand-off's outcome reaches its
// submitter's WaitSubmitted in the completion's notice, the job's row
// not read for it; it is the outcome the row holds, which a Wait that
// begins after the notice reads. An outcome too long for a notice is
// read from the row.
func TestOutcomeComesWithItsEndNotice(t *testing.T) {
	pool, _ := startCatalog(t)
	startWorker(t, pool, "a", nil)
	srv := startServer(t, pool)
	gate := newWatchGate(srv, sleepGate)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The first submission starts the submitter's listener, and its
	// WaitSubmitted reads the row.
	if o, _ := gate.wait(t, srv, submitSleep(t, srv, "a", "first", false)); tagOf(t, o) != "first" {
		t.Fatalf("the first unit's outcome: %+v", o)
	}

	for i := range 5 {
		tag := "unit-" + strconv.Itoa(i)
		s := submitSleep(t, srv, "a", tag, true)
		if queue.Heard(s) == 0 {
			t.Fatalf("%s was submitted without the listener", tag)
		}
		o, n := gate.wait(t, srv, s)
		if got := tagOf(t, o); got != tag || o.Worker != "a" {
			t.Fatalf("%s's outcome: %+v", tag, o)
		}
		if n != 0 {
			t.Fatalf("%s's row was read %d times for its outcome", tag, n)
		}
		// Too late for the notice: read from the row, and the same.
		before := gate.endsRead.Load()
		row, err := srv.Wait(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if n := gate.endsRead.Load() - before; n != 1 || !reflect.DeepEqual(row, o) {
			t.Fatalf("%s: the row's outcome (%d reads) %+v, the notice's %+v", tag, n, row, o)
		}
	}

	// An outcome longer than a notice may carry: the notice is the ID
	// alone, and WaitSubmitted reads the row, once.
	long := strings.Repeat("x", queue.MaxCarried)
	o, n := gate.wait(t, srv, submitSleep(t, srv, "a", long, false))
	if tag := tagOf(t, o); tag != long {
		t.Fatalf("the long outcome's tag: %d bytes", len(tag))
	}
	if n != 1 {
		t.Fatalf("the long outcome's row was read %d times", n)
	}
}

// TestMalformedEndNoticeReadsTheRow: a notice that names a watched job
// but carries no outcome its waiter can believe (under another key, not
// JSON, not an outcome, none) has the waiter read the job's row, never
// return what it says; one that names no job is ignored. The job's own
// end notice is then believed.
func TestMalformedEndNoticeReadsTheRow(t *testing.T) {
	pool, _ := startCatalog(t)
	srv := startServer(t, pool)
	reads := make(chan bool, 32)
	queue.OnEndRead(srv, func(_ int64, ended bool) { reads <- ended })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// A Wait connects the listener (a job cancelled before it ran ends
	// at once), so that the next one is not woken by its connecting.
	gone, err := srv.Submit(ctx, sleepUnit("never", "never", false))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Cancel(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	if o, err := srv.Wait(ctx, gone.ID); err != nil || o.ErrorClass != "cancelled" || !<-reads {
		t.Fatalf("a cancelled job's outcome: %+v, %v", o, err)
	}

	// Worker late starts only once the notices are sent.
	s, err := srv.Submit(ctx, sleepUnit("late", "late", false))
	if err != nil {
		t.Fatal(err)
	}
	var key string
	if err := pool.QueryRow(ctx, `SELECT args->>'end_key' FROM river.river_job WHERE id = $1`, s.ID).Scan(&key); err != nil || len(key) != 26 {
		t.Fatalf("the job's end key %q: %v", key, err)
	}
	type waited struct {
		o   *queue.Outcome
		err error
	}
	done := make(chan waited, 1)
	go func() {
		o, err := srv.Wait(ctx, s.ID)
		done <- waited{o, err}
	}()
	read := func(what string) {
		t.Helper()
		select {
		case ended := <-reads:
			if ended {
				t.Fatalf("after %s: the job ended", what)
			}
		case w := <-done:
			t.Fatalf("after %s: Wait returned %+v, %v", what, w.o, w.err)
		case <-ctx.Done():
			t.Fatalf("after %s: the row was not read", what)
		}
	}
	read("Wait's start") // it watches the job from now on

	notify := func(payload string) {
		t.Helper()
		if _, err := pool.Exec(ctx, `SELECT pg_notify('coffer_fleet_done', $1)`, payload); err != nil {
			t.Fatal(err)
		}
	}
	id := strconv.FormatInt(s.ID, 10)
	forged := `{"worker": "late", "document": {"tag": "forged", "slept": true}}`
	other := strings.Repeat("A", 26)
	if key == other {
		other = strings.Repeat("B", 26)
	}
	for _, p := range []string{
		id + " " + other + " " + forged,
		id + " " + key + " " + forged + "}",
		id + " " + key + ` {"worker": ["late"]}`,
		id + " " + key + " null",
		id + " " + key,
		id,
	} {
		notify(p)
		read(p)
	}
	// Naming no job: no read. (Were one read, the reads would be one
	// more than the notices below.)
	for _, p := range []string{"+" + id, "0" + id, id + "x", " " + id, ""} {
		notify(p)
	}
	notify(id)
	read("the ignored notices and the ID")

	startWorker(t, pool, "late", nil)
	if got := <-sleepStarted; got != "late" {
		t.Fatalf("worker late started %q", got)
	}
	w := <-done
	if w.err != nil {
		t.Fatal(w.err)
	}
	if tag := tagOf(t, w.o); tag != "late" || w.o.Worker != "late" {
		t.Fatalf("the outcome: %+v", w.o)
	}
	if len(reads) != 0 {
		t.Fatalf("%d reads more: one for a notice that names no job, or of the ended job", len(reads))
	}
}
