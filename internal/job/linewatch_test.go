package job_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/coffer-backup/coffer/internal/catalog"
	"github.com/coffer-backup/coffer/internal/job"
)

// waitFor waits until cond holds: a failure guard of eventWait.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(eventWait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, eventWait)
		}
		time.Sleep(5 * time.Millisecond) // polling interval
	}
}

// A process with no subscriber hears no notice of another process's
// lines or progress on PostgreSQL, only those of the jobs' other
// changes; it listens for lines while it has a subscriber, who gets
// them, and stops once the last has gone.
func TestOnlyAProcessWithSubscribersHearsLines(t *testing.T) {
	job.SetLineLinger(t, time.Millisecond)
	loc := locations()["postgres"](t)
	runnerCat := openLocation(t, loc)
	runner := newManager(t, runnerCat, job.Options{})
	idle := newManager(t, openLocation(t, loc), job.Options{})
	ctx := context.Background()

	h := must[*job.Handle](t)(runner.Start(ctx, job.Spec{Kind: job.KindVerify}))
	h.Log("info", "one", nil)
	ok(t, h.Flush(ctx))
	must[time.Time](t)(runnerCat.Heartbeat(ctx, h.ID(), &catalog.Progress{BytesDone: 1, BytesTotal: 2}))
	must[job.Record](t)(h.Finish(ctx, catalog.StatusSuccess, ""))
	// The creation and the end, one notice each; the lines' and the
	// progress's, committed in between, would have come before the end's.
	waitFor(t, "the idle process hears the job's creation and end", func() bool {
		_, others := idle.NoticesHeard()
		return others >= 2
	})
	if lines, _ := idle.NoticesHeard(); lines != 0 || idle.ListeningForLines() {
		t.Fatalf("a process without subscribers heard %d notices of lines (listening: %v)", lines, idle.ListeningForLines())
	}

	h = must[*job.Handle](t)(runner.Start(ctx, job.Spec{Kind: job.KindVerify}))
	s := must[*job.Subscription](t)(idle.Subscribe(ctx, h.ID(), 0))
	same(t, "first event", describe(next(t, s)), "status running")
	waitFor(t, "the subscriber's process listens for lines", idle.ListeningForLines)
	h.Log("info", "two", nil)
	ok(t, h.Flush(ctx))
	same(t, "event", describe(next(t, s)), "log 1:two")
	waitFor(t, "the subscriber's process hears the notice of its line", func() bool {
		lines, _ := idle.NoticesHeard()
		return lines > 0
	})
	s.Close()
	for range s.C {
	}
	waitFor(t, "the process stops listening for lines", func() bool { return !idle.ListeningForLines() })
	must[job.Record](t)(h.Finish(ctx, catalog.StatusSuccess, ""))
}

// A subscriber that subscribes while another process appends lines gets
// every line, in order: those appended before its process listens for
// lines come from the read that follows when the listening holds, even
// when no notice comes after them.
func TestASubscriberMissesNoLineAppendedAsItSubscribes(t *testing.T) {
	loc := locations()["postgres"](t)
	writer := openLocation(t, loc)
	followerCat := openLocation(t, loc)
	ctx := context.Background()
	j := &catalog.Job{Kind: catalog.KindVerify, Status: catalog.StatusRunning}
	ok(t, writer.CreateJob(ctx, j))
	for round := range 5 {
		// A new process each round: it starts listening as it subscribes.
		follower := newManager(t, followerCat, job.Options{})
		base := must[job.Record](t)(writer.GetJob(ctx, j.ID)).LogLines
		appended, stop, done := make(chan struct{}, 1), make(chan struct{}), make(chan error, 1)
		go func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					done <- nil
					return
				default:
				}
				if err := writer.AddEvents(ctx, []catalog.Event{{JobID: j.ID, Kind: "line", Message: fmt.Sprintf("%d.%d", round, i)}}); err != nil {
					done <- err
					return
				}
				select {
				case appended <- struct{}{}:
				default:
				}
			}
		}()
		<-appended
		s := must[*job.Subscription](t)(follower.Subscribe(ctx, j.ID, base))
		close(stop)
		ok(t, <-done)
		// The last lines, very likely before the listening holds, and no
		// notice after them.
		ok(t, writer.AddEvents(ctx, []catalog.Event{{JobID: j.ID, Kind: "line", Message: "last"}}))
		total := must[job.Record](t)(writer.GetJob(ctx, j.ID)).LogLines
		same(t, "first event", describe(next(t, s)), "status running")
		for seq := base + 1; seq <= total; seq++ {
			ev := next(t, s)
			if ev.Type != job.EventLog || ev.Line.Seq != seq {
				t.Fatalf("round %d: got %s, want line %d (of %d..%d)", round, describe(ev), seq, base+1, total)
			}
		}
		s.Close()
		for range s.C {
		}
		ok(t, follower.Close())
	}
}
